#pragma once
// The bench's own bookkeeping between ranks, through the group's store rather than the collectives under test:
// arrival marks per case (so a stuck case names the ranks that never came), each rank's timings for rank 0,
// and a failure mark that lets every rank stop together.

#include <dcomm/store.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#include "tools/bench/library.hpp"

namespace dcomm::bench {

class Exchange {
 public:
  /// `store`: already prefixed for the bench. `timeout` bounds collect().
  Exchange(std::shared_ptr<Store> store, int rank, int world, Duration timeout);

  /// Marks this rank as having reached case `seq`.
  void arrive(uint64_t seq);
  /// The ranks that have not reached case `seq` (asks the store; never waits).
  std::vector<int> missing(uint64_t seq);
  /// Posts this rank's measurements of case `seq`.
  void publish(uint64_t seq, const LocalResult& r);
  /// Rank 0: every rank's measurements of case `seq`, index = rank; then forgets the case's keys.
  std::vector<LocalResult> collect(uint64_t seq);
  /// Tells the other ranks that case `seq` failed.
  void mark_failed(uint64_t seq, int rank);
  /// Waits up to `timeout` for some rank to mark case `seq` failed; whether one did.
  bool wait_failed(uint64_t seq, Duration timeout);

 private:
  std::string key(const char* kind, uint64_t seq, int rank) const;

  std::shared_ptr<Store> store_;
  int rank_, world_;
  Duration timeout_;
};

}  // namespace dcomm::bench
