#pragma once
// Stream ordering for collectives on CUDA buffers, one StreamOrder per (group, device).
//
//   caller's thread, at the call:      ticket = order.record_input(opts.stream)
//                                        an event after the caller's queued work; the group's stream waits on it
//   worker, before touching buffers:    order.wait_input(ticket, deadline, what)    (polls, bounded)
//   worker, while running:              coll::StreamScope scope(order.stream())      (kernels and copies go there)
//   worker, when done (ok or failed):   order.finish(ticket)
//   Work::wait_stream(s):               order.complete_on(ticket, s)
//                                        a device-side wait on s until finish(ticket); the host does not block
//
// The group's stream is non-blocking, so dcomm's kernels never queue behind the legacy default stream (which could
// hold a gate kernel waiting for this very collective). Tickets finish in issue order, as a group's operations do.
// In a build without CUDA the class still exists: every input is ready at once and a non-null stream is rejected.

#include <cstdint>
#include <memory>
#include <string_view>

#include <dcomm/types.hpp>

#include "common/deadline.hpp"

namespace dcomm::runtime {

class StreamOrder {
 public:
  /// `gate_timeout` bounds each device-side wait of complete_on (the group's timeout plus a margin is right).
  StreamOrder(Device device, Duration gate_timeout);
  ~StreamOrder();
  StreamOrder(const StreamOrder&) = delete;
  StreamOrder& operator=(const StreamOrder&) = delete;

  /// The group's stream (a cudaStream_t; null without CUDA).
  void* stream() const noexcept;
  /// Records an event after everything queued on `user_stream` so far (null: the device's default stream) and
  /// makes the group's stream wait for it. Returns the collective's ticket. Never blocks the host.
  uint64_t record_input(void* user_stream);
  /// Whether the caller's work before `ticket` has finished. Never blocks.
  bool input_ready(uint64_t ticket);
  /// Waits on the host, polling with backoff, until input_ready(ticket). Throws TimeoutError naming `what`.
  void wait_input(uint64_t ticket, const Deadline& deadline, std::string_view what);
  /// Makes work queued on `user_stream` after this call wait until finish(ticket), on the device.
  void complete_on(uint64_t ticket, void* user_stream);
  /// The collective of `ticket` is over (successfully or not): releases the device-side waits for it and every
  /// earlier ticket. Never throws.
  void finish(uint64_t ticket) noexcept;
  /// Whether some device-side wait gave up after gate_timeout (its stream then ran on without the collective).
  bool gate_timed_out() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dcomm::runtime
