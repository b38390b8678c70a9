#include "train_options.hpp"

#include <CLI/CLI.hpp>
#include <cstdlib>

namespace examples {

TrainOptions parse_train_options(int argc, char** argv) {
  TrainOptions o;
  CLI::App app{"Data-parallel training of a small MLP on a synthetic data set, over dcomm. Launch with dcomm-run."};
  app.add_option("--steps", o.steps, "optimizer steps")->check(CLI::PositiveNumber);
  app.add_option("--batch", o.batch, "samples per rank per step")->check(CLI::PositiveNumber);
  app.add_option("--samples", o.samples, "size of the synthetic data set")->check(CLI::PositiveNumber);
  app.add_option("--dim", o.dim, "input dimension")->check(CLI::PositiveNumber);
  app.add_option("--hidden", o.hidden, "hidden layer widths, e.g. --hidden 64,64")->delimiter(',');
  app.add_option("--classes", o.classes, "number of classes")->check(CLI::Range(2, 1 << 20));
  app.add_option("--seed", o.seed, "seed of the data, the initial weights and the batch sampler");
  app.add_option("--optimizer", o.optimizer.name, "sgd (with momentum) or adam")->check(CLI::IsMember({"sgd", "adam"}));
  float lr = -1;
  app.add_option("--lr", lr, "learning rate (default 0.1 for sgd, 0.01 for adam)");
  app.add_option("--momentum", o.optimizer.momentum, "sgd momentum");
  app.add_option("--bucket-bytes", o.bucket_bytes, "gradient bucket size in bytes");
  bool no_bucketing = false;
  app.add_flag("--no-bucketing", no_bucketing, "one blocking all_reduce per tensor after the backward pass");
  app.add_option("--algo", o.algorithm, "all_reduce algorithm (default: the group's choice)");
  app.add_option("--ckpt-every", o.ckpt_every, "write a snapshot every N steps (0: never)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ckpt-dir", o.ckpt_dir, "snapshot directory; the run resumes from the newest snapshot in it");
  app.add_option("--on-failure", o.on_failure, "stop (default) or shrink: the survivors shrink the group and go on")
      ->check(CLI::IsMember({"stop", "shrink"}));
  app.add_option("--kill-at-step", o.kill_at_step, "one rank SIGKILLs itself at this step on the first round only");
  app.add_option("--corrupt-at-step", o.corrupt_at_step,
                 "one rank flips a bit of its weights after this step, to show the replica check fail");
  app.add_option("--fault-rank", o.fault_rank, "the rank --kill-at-step and --corrupt-at-step hit (default: the last)");
  app.add_option("--log-every", o.log_every, "print the loss every N steps")->check(CLI::PositiveNumber);
  app.add_flag("--benchmark", o.benchmark, "time bucketed against per-tensor gradient all-reduce");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  o.bucketing = !no_bucketing;
  o.optimizer.lr = lr > 0 ? lr : (o.optimizer.name == "adam" ? 0.01f : 0.1f);
  if (o.ckpt_every > 0 && o.ckpt_dir.empty()) {
    std::fprintf(stderr, "--ckpt-every needs --ckpt-dir\n");
    std::exit(2);
  }
  return o;
}

}  // namespace examples
