#pragma once
// Data movements that ride on the call check's rounds (call_check.hpp), for algorithms marked fuses_check. Round
// k = 0..⌈log₂P⌉-1 is the check's: rank r sends to r + 2^k and hears from r - 2^k. Each helper runs the check
// (c.call; null when checks are off) with its data along, and throws the check's error on a mismatched call.

#include <cstddef>

#include "collectives/context.hpp"

namespace dcomm::coll {

/// Whether a call rides: it is on host memory and `fits` (gather_rides, broadcast_rides). When it does not, runs
/// the check itself (c.call), so that the algorithm can go on with the one it falls back to.
bool rides_else_check(const Context& c, bool fits);

/// Whether Bruck's gather of `block_bytes` from every rank fits the check's rounds (at most kMaxRideBytes a round)
/// on `size` ranks.
bool gather_rides(double block_bytes, int size);
/// Bruck's all-gather on the check's rounds: `held` (P * block_bytes, place 0 this rank's block on entry) ends with
/// place i holding rank (r - i) mod P's block. Round k sends the first min(2^k, P - 2^k) places to r + 2^k and
/// appends as many from r - 2^k.
void ride_gather(const Context& c, char* held, std::size_t block_bytes);

/// all_gather and gather on the check's rounds: gathers every rank's `count` elements of `send` with ride_gather
/// and, when `recv` is not null, puts them there in rank order.
void ride_all_gather(const Context& c, const void* send, std::size_t count, void* recv);

/// For the reducing collectives: whether c.work rides (rides_else_check with gather_rides of c.work_count).
bool work_rides_else_check(const Context& c);
/// For the reducing collectives: gathers every rank's c.work (c.work_count elements) with ride_gather, then, when
/// `combine`, sets elements [first, first + count) of c.work to the P inputs combined in rank order (rank 0's
/// first), so every rank that combines computes the same bits.
void ride_reduce(const Context& c, std::size_t first, std::size_t count, bool combine);

/// Whether a broadcast of `bytes` fits the check's rounds.
bool broadcast_rides(double bytes);
/// A broadcast from `root` on the check's rounds: in round k the ranks that hold the data (relative ranks below
/// 2^k) send it on to r + 2^k along with their descriptor; the others send the descriptor alone.
void ride_broadcast(const Context& c, char* buf, std::size_t bytes, int root);

/// Room for a small per-call buffer: on the stack up to kLocalBytes, else scratch memory on the call's device.
class RideBuffer {
 public:
  static constexpr std::size_t kLocalBytes = 4096;
  RideBuffer(const Context& c, std::size_t count);
  RideBuffer(const RideBuffer&) = delete;
  RideBuffer& operator=(const RideBuffer&) = delete;
  char* data() { return data_; }

 private:
  alignas(64) char local_[kLocalBytes];
  Scratch large_;
  char* data_;
};

}  // namespace dcomm::coll
