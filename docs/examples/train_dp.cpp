// Data-parallel training over dcomm: every rank holds a replica of a small MLP, computes gradients on its own slice
// of each global batch, averages them with all_reduce (bucketed and overlapped with the backward pass), and applies
// the same optimizer step, so the replicas stay bit-identical, which is checked after every step. Rank 0 writes
// atomic snapshots; a restarted run resumes from the newest one and ends with exactly the weights an uninterrupted
// run would have.
//
//   dcomm-run --nproc-per-node 3 -- train_dp --steps 200 --optimizer adam
//   dcomm-run --nproc-per-node 3 --max-restarts 1 -- train_dp --ckpt-every 20 --ckpt-dir /tmp/ck --kill-at-step 50
//   dcomm-run --nproc-per-node 3 -- train_dp --benchmark --hidden 512,512 --steps 20
//   dcomm-run --nproc-per-node 4 --keep-going -- train_dp --on-failure shrink --kill-at-step 50
//     (no restart: the survivors shrink the group, re-shard the same global batches over themselves and go on
//     from the state in their memory)
//
// See docs/walkthrough.md for a tour of the code.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <dcomm/dcomm.hpp>
#include <exception>

#include "train_options.hpp"
#include "trainer.hpp"

namespace {

using examples::Trainer;
using examples::TrainOptions;

int restart_count() {
  // dcomm-run counts the rounds it has restarted the job; the first round is 0.
  const char* v = std::getenv("DCOMM_RESTART_COUNT");
  return v != nullptr ? std::atoi(v) : 0;
}

// Time `steps` training steps with one gradient synchronisation strategy; returns seconds per step on this rank.
double time_steps(dcomm::ProcessGroup& group, Trainer& trainer, bool bucketing, int steps, double* exposed) {
  for (int i = 0; i < 2; ++i) trainer.step(bucketing);  // warm-up: connections, caches
  group.barrier();
  *exposed = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) {
    trainer.step(bucketing);
    *exposed += trainer.sync(bucketing).exposed_wait().count();
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  *exposed /= steps;
  return total / steps;
}

int run_benchmark(dcomm::ProcessGroup& group, Trainer& trainer, const TrainOptions& o) {
  double exposed_bucketed = 0, exposed_per_tensor = 0;
  const double bucketed = time_steps(group, trainer, true, o.steps, &exposed_bucketed);
  const double per_tensor = time_steps(group, trainer, false, o.steps, &exposed_per_tensor);
  trainer.check_replicas_identical();
  if (group.rank() == 0) {
    std::printf("benchmark: %d ranks, %zu parameters in %zu tensors, %d steps each\n", group.size(),
                trainer.model().param_count(), trainer.model().tensors().size(), o.steps);
    std::printf(
        "  bucketed (%zu buckets of <= %zu B, async, overlapped): %8.2f ms/step, %8.2f ms waiting for "
        "all_reduce after backward\n",
        trainer.sync(true).buckets().size(), o.bucket_bytes, bucketed * 1e3, exposed_bucketed * 1e3);
    std::printf(
        "  per-tensor (one blocking all_reduce per tensor):     %8.2f ms/step, %8.2f ms in all_reduce after "
        "backward\n",
        per_tensor * 1e3, exposed_per_tensor * 1e3);
  }
  return 0;
}

// --on-failure shrink, after a step failed on this rank: shrink, then put every survivor on the same step. A step
// that failed part-way (the sampler drew its batch, the weights may or may not have moved) is undone; a survivor
// whose step finished before the others failed is at most one step ahead (nobody passes a collective alone), and
// goes back too when anyone did not finish it. Returns the new group.
std::shared_ptr<dcomm::ProcessGroup> shrink_and_realign(dcomm::ProcessGroup& group, Trainer& trainer,
                                                        int64_t started_at, const dcomm::Error& why) {
  std::fprintf(stderr, "rank %d/%d: step %lld failed (%s); shrinking\n", group.rank(), group.size(),
               static_cast<long long>(started_at + 1), why.what());
  dcomm::ShrinkResult res = group.shrink();
  if (trainer.steps_done() == started_at) trainer.restore_previous();
  trainer.rebind(*res.group);
  int64_t at = trainer.steps_done();
  res.group->all_reduce(dcomm::Buffer(&at, 1), dcomm::Reduction{dcomm::ReduceOp::kMin});
  if (trainer.steps_done() > at) trainer.restore_previous();
  trainer.check_replicas_identical();
  if (res.group->rank() == 0) {
    std::string failed;
    for (int f : res.failed) {
      if (!failed.empty()) failed.push_back(',');
      failed.append(std::to_string(f));
    }
    std::printf("shrunk from %d to %d ranks (failed [%s]); going on from step %lld, same global batch\n",
                group.size(), res.group->size(), failed.c_str(), static_cast<long long>(at));
    std::fflush(stdout);
  }
  return res.group;
}

int train(std::shared_ptr<dcomm::ProcessGroup> owned, const TrainOptions& o) {
  dcomm::ProcessGroup* current = owned.get();
  dcomm::ProcessGroup& group = *owned;
  Trainer trainer(group, o);
  bool leader = group.rank() == 0;
  const double initial_loss = trainer.model().evaluate(trainer.data()).loss;
  const std::string resumed_from = trainer.resume();
  if (leader) {
    std::printf("train_dp: %d ranks, %zu parameters, optimizer %s, %s, restart round %d\n", group.size(),
                trainer.model().param_count(), o.optimizer.name.c_str(),
                o.bucketing ? "bucketed async all_reduce" : "one all_reduce per tensor", restart_count());
    if (!resumed_from.empty())
      std::printf("resumed from %s at step %lld\n", resumed_from.c_str(), static_cast<long long>(trainer.steps_done()));
    std::fflush(stdout);
  }
  if (o.benchmark) return run_benchmark(group, trainer, o);

  const int fault_rank = o.fault_rank >= 0 ? o.fault_rank : group.size() - 1;
  int shrinks = 0;
  while (trainer.steps_done() < o.steps) {
    const int64_t next = trainer.steps_done() + 1;
    // The first round's, first group's --fault-rank only: after a restart or a shrink the step comes again.
    if (next == o.kill_at_step && shrinks == 0 && current->rank() == fault_rank && restart_count() == 0) {
      std::printf("rank %d: killing myself at step %lld (--kill-at-step)\n", current->rank(),
                  static_cast<long long>(next));
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
    double loss = 0;
    try {
      if (o.on_failure == "shrink") trainer.remember();
      loss = trainer.step(o.bucketing);
      if (next == o.corrupt_at_step && current->rank() == fault_rank) trainer.corrupt_weights();
      trainer.check_replicas_identical();
    } catch (const dcomm::Error& e) {
      if (o.on_failure != "shrink") throw;
      owned = shrink_and_realign(*current, trainer, next - 1, e);
      current = owned.get();
      leader = current->rank() == 0;
      ++shrinks;
      continue;
    }
    if (leader && (next == 1 || next % o.log_every == 0 || next == o.steps)) {
      std::printf("step %5lld  loss %.6f\n", static_cast<long long>(next), loss);
      std::fflush(stdout);
    }
    if (o.ckpt_every > 0 && next % o.ckpt_every == 0) {
      const std::string path = trainer.save_snapshot();
      if (leader) {
        std::printf("snapshot %s\n", path.c_str());
        std::fflush(stdout);  // a rank killed later must not take this line with it
      }
    }
  }

  const auto final_eval = trainer.model().evaluate(trainer.data());
  current->barrier();
  if (leader) {
    std::printf("final: loss %.6f (initial %.6f), accuracy %.3f after %lld steps\n", final_eval.loss, initial_loss,
                final_eval.accuracy, static_cast<long long>(trainer.steps_done()));
    std::printf("weights hash %016llx\n", static_cast<unsigned long long>(trainer.fingerprint()));
  }
  if (!(final_eval.loss < initial_loss)) {
    std::fprintf(stderr, "rank %d: the loss did not fall (%.6f -> %.6f)\n", current->rank(), initial_loss,
                 final_eval.loss);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const TrainOptions options = examples::parse_train_options(argc, argv);
  int rank = -1;
  try {
    std::shared_ptr<dcomm::ProcessGroup> group = dcomm::init();
    rank = group->rank();
    return train(group, options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_dp rank %d: %s\n", rank, e.what());
    return 1;
  }
}
