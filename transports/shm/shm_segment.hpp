#pragma once
// One rank's POSIX shared-memory segment: a header, then one ring per world rank (the ring where that rank
// writes to the owner). The owner creates it (0600), peers map it during connect, and the owner unlinks the
// name as soon as every peer has mapped it, so nothing is left in /dev/shm when a process dies later.

#include <atomic>
#include <cstdint>
#include <string>

#include "transports/shm/shm_ring.hpp"

namespace dcomm::transport::shm {

struct SegmentHeader {
  uint64_t magic;
  uint64_t ring_bytes;
  int32_t owner_rank;
  int32_t owner_pid;
  int32_t world_size;
  std::atomic<uint32_t> closed;  ///< set by the owner's close(): peers stop waiting on it
  uint64_t probe_addr;           ///< an address in the owner's memory holding probe_value, for the CMA check
  uint64_t probe_value;
};
inline constexpr uint64_t kSegmentMagic = 0x64636f6d6d73686dull;  // "dcommshm"
inline constexpr uint64_t kSegmentHeaderBytes = 4096;

class Segment {
 public:
  Segment() = default;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  Segment(Segment&& o) noexcept { *this = std::move(o); }
  Segment& operator=(Segment&& o) noexcept;
  ~Segment() { release(); }

  /// Creates and maps a new segment with `world_size` rings of `ring_bytes`; throws SystemError naming it.
  static Segment create(const std::string& name, int owner_rank, int world_size, uint64_t ring_bytes);
  /// Maps a peer's segment and checks its header.
  static Segment open(const std::string& name, int expect_rank);

  SegmentHeader* header() const { return static_cast<SegmentHeader*>(base_); }
  /// The ring in which `writer` sends to this segment's owner.
  Ring ring(int writer) const;
  const std::string& name() const { return name_; }

  /// Removes the name (mappings stay valid). Idempotent, never throws.
  void unlink() noexcept;
  /// Unlinks when owned and not yet unlinked, and unmaps.
  void release() noexcept;

 private:
  std::string name_;
  void* base_ = nullptr;
  uint64_t size_ = 0;
  bool owner_ = false;
  bool linked_ = false;
};

/// The segment name of `rank` in `world_id` ("/dcomm-<world_id>-<rank>").
std::string segment_name(const std::string& world_id, int rank);

}  // namespace dcomm::transport::shm
