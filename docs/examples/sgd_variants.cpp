// The synchronous-SGD variants of Dutta et al. ("Slow and Stale Gradients Can Win the Race", AISTATS 2018) on
// dcomm's point-to-point API: rank 0 is a parameter server, ranks 1..P are learners with injected straggler
// delays. For each variant the PS reports the time per epoch and the final loss; under stragglers the expected
// ordering of time per epoch is K-batch-sync < K-sync < fully-sync.
//
//   dcomm-run --nproc-per-node 4 -- sgd_variants --k 2 --epochs 3 --straggler-mean-ms 20
//
// What makes the variants expressible: receives from any source (the PS takes whichever learner is first),
// cancellation of posted receives (K-sync withdraws the receives of the P-K slowest), and tags that carry the
// model's version (a stale gradient can never be mistaken for a fresh one). See docs/walkthrough.md.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <dcomm/dcomm.hpp>
#include <vector>

#include "learner.hpp"
#include "parameter_server.hpp"
#include "sgd_protocol.hpp"

namespace {

using examples::Variant;
using examples::VariantResult;
using examples::VariantsConfig;

struct Options {
  VariantsConfig config;
  std::vector<std::string> variants;
};

Options parse_options(int argc, char** argv) {
  Options o;
  VariantsConfig& c = o.config;
  double timeout_s = 60;
  CLI::App app{"Parameter-server SGD variants over dcomm point-to-point. Rank 0 serves, ranks 1..P learn."};
  app.add_option("--variants", o.variants, "which to run (default: all), e.g. --variants fully-sync,K-sync")
      ->delimiter(',');
  app.add_option("--k", c.k, "K of the K-variants (1..P)")->check(CLI::PositiveNumber);
  app.add_option("--epochs", c.epochs, "epochs per variant")->check(CLI::PositiveNumber);
  app.add_option("--samples", c.samples, "size of the synthetic data set")->check(CLI::PositiveNumber);
  app.add_option("--batch", c.batch, "mini-batch size")->check(CLI::PositiveNumber);
  app.add_option("--hidden", c.hidden, "hidden layer widths")->delimiter(',');
  app.add_option("--lr", c.lr, "learning rate");
  app.add_option("--seed", c.seed, "seed of the data, the model and the delays");
  app.add_option("--compute-ms", c.compute_ms, "fixed time per mini-batch")->check(CLI::NonNegativeNumber);
  app.add_option("--straggler-mean-ms", c.straggler_mean_ms, "mean of the exponential delay per mini-batch")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--slow-learner", c.slow_learner, "one learner (1..P) that is slower by --slow-ms");
  app.add_option("--slow-ms", c.slow_ms, "extra time per mini-batch of --slow-learner")->check(CLI::NonNegativeNumber);
  app.add_option("--timeout-s", timeout_s, "bound on every wait")->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  c.timeout = dcomm::Duration(static_cast<int64_t>(timeout_s * 1000));
  if (o.variants.empty())
    for (Variant v : examples::kAllVariants) o.variants.push_back(examples::to_string(v));
  return o;
}

void print_results(const std::vector<VariantResult>& results, const VariantsConfig& c, int learners) {
  std::printf(
      "sgd_variants: 1 parameter server + %d learners, K = %d, %d epochs of %d mini-batches of %d; delay per "
      "mini-batch %.1f ms + Exp(%.1f ms)",
      learners, c.k, c.epochs, c.batches_per_epoch(), c.batch, c.compute_ms, c.straggler_mean_ms);
  if (c.slow_learner > 0) std::printf(", learner %d +%.1f ms", c.slow_learner, c.slow_ms);
  std::printf("\n%-14s %12s %8s %10s %10s %6s %12s   %s\n", "variant", "time/epoch", "updates", "staleness",
              "cancelled", "late", "interrupted", "loss");
  for (const VariantResult& r : results) {
    std::printf("%-14s %9.1f ms %8lld %10.2f %10lld %6lld %12lld   %.4f -> %.4f\n", examples::to_string(r.variant),
                1e3 * r.seconds / r.epochs, static_cast<long long>(r.updates), r.mean_staleness,
                static_cast<long long>(r.cancelled), static_cast<long long>(r.drained + r.discarded),
                static_cast<long long>(r.interrupted), r.initial_loss, r.final_loss);
  }
  auto per_epoch = [&](Variant v) -> double {
    for (const VariantResult& r : results)
      if (r.variant == v) return 1e3 * r.seconds / r.epochs;
    return -1;
  };
  const double kbs = per_epoch(Variant::kKBatchSync), ks = per_epoch(Variant::kKSync),
               fs = per_epoch(Variant::kFullySync);
  if (kbs > 0 && ks > 0 && fs > 0) {
    const bool expected = kbs < ks && ks < fs;
    std::printf("ordering (time per epoch): K-batch-sync %.1f ms %s K-sync %.1f ms %s fully-sync %.1f ms: %s\n", kbs,
                kbs < ks ? "<" : ">=", ks, ks < fs ? "<" : ">=", fs,
                expected          ? "as expected under stragglers"
                : c.k == learners ? "K = P: K-sync is fully-sync, and equal times are expected"
                                  : "NOT the expected order (too few stragglers, or a busy machine)");
  }
  std::fflush(stdout);
}

int run(dcomm::ProcessGroup& group, const Options& o) {
  const int learners = group.size() - 1;
  if (learners < 1)
    throw dcomm::InvalidUsageError("sgd_variants needs at least 2 ranks: a parameter server and a learner");
  if (o.config.k > learners) {
    throw dcomm::InvalidUsageError("--k " + std::to_string(o.config.k) + " is larger than the " +
                                   std::to_string(learners) + " learners");
  }
  std::vector<VariantResult> results;
  bool loss_fell = true;
  for (const std::string& name : o.variants) {
    Variant v;
    if (!examples::parse_variant(name, &v)) throw dcomm::InvalidUsageError("unknown variant '" + name + "'");
    const examples::Tags tags{static_cast<int>(v)};
    group.barrier();  // every variant starts together, with no traffic of the previous one in flight
    if (group.rank() == 0) {
      results.push_back(examples::run_parameter_server(group, v, o.config, tags));
      loss_fell = loss_fell && results.back().final_loss < results.back().initial_loss;
    } else {
      examples::run_learner(group, v, o.config, tags);
    }
  }
  group.barrier();
  if (group.rank() == 0) {
    print_results(results, o.config, learners);
    if (!loss_fell) std::fprintf(stderr, "sgd_variants: the loss did not fall for every variant\n");
  }
  int ok = loss_fell ? 1 : 0;  // rank 0 knows; everyone exits with its verdict
  group.broadcast(dcomm::Buffer(&ok, 1), 0);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  int rank = -1;
  try {
    std::shared_ptr<dcomm::ProcessGroup> group = dcomm::init();
    rank = group->rank();
    return run(*group, options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sgd_variants rank %d: %s\n", rank, e.what());
    return 1;
  }
}
