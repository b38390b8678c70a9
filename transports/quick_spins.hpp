#pragma once
// Where the scheduler may put a peer on this rank's core (ranks allowed every core: mpirun --bind-to none), whether
// a small receive from it should spin for the answer before it yields (MeshImpl::wait). A peer running on another
// core answers within a microsecond, which a spin of MeshImpl::kQuickAnswerPolls polls catches; a peer on this core
// cannot answer until this rank yields, and then every message paid the spin first: 4 ranks unbound, sendrecv 8-512
// B p50 2.2-3.4 us where a pair shared a core, 1.2-1.7 yielding at once (session 32). The scheduler's placement
// changes while a job runs, so the answer is kept per peer from what the spins found: after kMisses quick spins in a
// row without the answer, the receives from that peer yield at once, and one in kRetryEvery spins again.
// Relaxed atomics: threads of a rank may wait on one peer at once, and a lost update only delays one guess.

#include <atomic>
#include <cstdint>

namespace dcomm::transport {

class QuickSpins {
 public:
  static constexpr unsigned kMisses = 2;
  static constexpr unsigned kRetryEvery = 16;

  /// Whether this receive spins for its answer (the caller then reports what it found through saw()).
  bool spin_quick() {
    if (misses_.load(std::memory_order_relaxed) < kMisses) return true;
    const unsigned skipped = skipped_.load(std::memory_order_relaxed) + 1;
    skipped_.store(skipped, std::memory_order_relaxed);
    return skipped % kRetryEvery == 0;
  }
  /// What a quick spin found: the answer within it, or not.
  void saw(bool answered) {
    const unsigned misses = misses_.load(std::memory_order_relaxed);
    misses_.store(answered ? 0 : misses < kMisses ? misses + 1 : misses, std::memory_order_relaxed);
  }

 private:
  std::atomic<unsigned> misses_{0};
  std::atomic<unsigned> skipped_{0};
};

}  // namespace dcomm::transport
