#pragma once
// Shared-memory windows among the ranks of a group on one node: every rank creates a segment named after its
// process id, world rank, group context and the creating call's number, and maps every other rank's. The owner
// unlinks its name once everyone has mapped it (or when the windows go away), so nothing is left in /dev/shm
// unless a process dies in between. The mappings live as long as the ShmWindows object.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/context.hpp"

namespace dcomm::coll {

/// Whether every rank of the group shares this rank's host (so the group can map each other's memory).
bool group_on_one_host(const GroupView& view);

class ShmWindows {
 public:
  /// Creates and maps this rank's segment of `bytes` (> 0), with its pages reserved up front so that a full
  /// /dev/shm fails here (SystemError) rather than with SIGBUS later. Local only: no messages.
  ShmWindows(const Context& c, std::size_t bytes);
  ~ShmWindows();
  ShmWindows(const ShmWindows&) = delete;
  ShmWindows& operator=(const ShmWindows&) = delete;

  /// Maps every other rank's segment; call once all of them exist (after a barrier).
  void map_peers(const Context& c);
  /// Unlinks this rank's name; call once every rank has mapped it (after a barrier).
  void unlink_mine() noexcept;
  char* of(int rank) { return segments_[static_cast<std::size_t>(rank)]; }

 private:
  char* map(const Context& c, int rank, bool create);

  std::size_t bytes_;
  int rank_;
  bool linked_ = false;
  std::vector<std::string> names_;
  std::vector<char*> segments_;
};

/// Collective over the group: every rank creates its window of `bytes`, the ranks agree that all succeeded, map each
/// other's and unlink their names (2⌈log₂P⌉ steps from `step`). Returns null on every rank when any rank could not
/// create its window (logged on that rank with the reason, and by rank 0 naming it and saying that `instead` runs).
std::unique_ptr<ShmWindows> open_windows(const Context& c, std::size_t bytes, uint32_t step, std::string_view instead);

}  // namespace dcomm::coll
