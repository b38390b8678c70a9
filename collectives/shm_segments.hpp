#pragma once
// Shared-memory windows for one collective call on one node: every rank creates a segment named after its
// process id, world rank, group context and call number, and maps every other rank's. The owner unlinks its
// name once everyone has mapped it (or when the window goes away), so nothing outlives the call in /dev/shm
// unless the process dies in between.

#include <cstddef>
#include <string>
#include <vector>

#include "collectives/context.hpp"

namespace dcomm::coll {

/// Whether every rank of the group shares this rank's host (so the group can map each other's memory).
bool group_on_one_host(const GroupView& view);

class ShmWindows {
 public:
  /// Creates this rank's segment of `bytes` (> 0). Local only: no messages.
  ShmWindows(const Context& c, std::size_t bytes);
  ~ShmWindows();
  ShmWindows(const ShmWindows&) = delete;
  ShmWindows& operator=(const ShmWindows&) = delete;

  char* mine() { return segments_[static_cast<std::size_t>(rank_)]; }
  /// Maps every other rank's segment; call once all of them exist (after a barrier).
  void map_peers();
  /// Unlinks this rank's name; call once every rank has mapped it (after a barrier).
  void unlink_mine() noexcept;
  char* of(int rank) { return segments_[static_cast<std::size_t>(rank)]; }

 private:
  char* map(int rank, bool create);

  const Context& c_;
  std::size_t bytes_;
  int rank_;
  bool linked_ = false;
  std::vector<std::string> names_;
  std::vector<char*> segments_;
};

}  // namespace dcomm::coll
