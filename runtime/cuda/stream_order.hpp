#pragma once
// Stream ordering for collectives on CUDA buffers, one StreamOrder per (group, device).
//
//   caller's thread, at the call:      ticket = order.record_input(opts.stream)
//                                        an event after the caller's queued work; the group's stream waits on it
//   worker, around the collective:     CollectiveScope scope(order, ticket, deadline, what)
//                                        makes the device current, sends dcomm's kernels to the group's stream,
//                                        waits (polling, bounded) for the input, and finish(ticket)es on exit
//   Work::wait_stream(s):               order.complete_on(ticket, s)
//                                        a device-side wait on s until finish(ticket); the host does not block
//
// The group's stream is non-blocking, so dcomm's kernels never queue behind the legacy default stream (which could
// hold a gate kernel waiting for this very collective). Tickets finish in issue order, as a group's operations do.
// In a build without CUDA the class still exists: every input is ready at once and a non-null stream is rejected.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
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

  /// The device this order serves (host for a host-only order).
  const Device& device() const noexcept;
  /// The group's stream (a cudaStream_t; null without CUDA).
  void* stream() const noexcept;
  /// Records an event after everything queued on `user_stream` so far (null: the device's default stream) and
  /// makes the group's stream wait for it. Returns the collective's ticket. Never blocks the host.
  uint64_t record_input(void* user_stream);
  /// Whether the caller's work before `ticket` has finished. Never blocks.
  bool input_ready(uint64_t ticket);
  /// Waits on the host, polling with backoff, until input_ready(ticket). Throws TimeoutError naming `what`.
  void wait_input(uint64_t ticket, const Deadline& deadline, std::string_view what);
  /// Makes work queued on `user_stream` after this call wait until finish(ticket), on the device. A host order
  /// queues nothing: host collectives are waited for on the host (Work::wait_stream's default).
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

/// What the worker holds while it runs one collective: the buffers' device is current, dcomm's kernels go to the
/// group's stream, the caller's input is complete (the constructor waits for it, bounded by `deadline`), and the
/// ticket is finished when the scope ends, however it ends. For a host StreamOrder it does nothing.
class CollectiveScope {
 public:
  CollectiveScope(StreamOrder& order, uint64_t ticket, const Deadline& deadline, std::string_view what);
  ~CollectiveScope();
  CollectiveScope(const CollectiveScope&) = delete;
  CollectiveScope& operator=(const CollectiveScope&) = delete;

 private:
  struct Cuda;
  StreamOrder& order_;
  uint64_t ticket_;
  std::unique_ptr<Cuda> cuda_;
};

/// For point-to-point calls on device buffers: waits on the host, polling with backoff, until the work queued on
/// `user_stream` (null: the device's default stream) before this call has finished, so the transport neither reads
/// a buffer a kernel is still writing nor overwrites one a kernel still reads. Throws TimeoutError naming `what`.
/// Host buffers: returns at once. A build without CUDA rejects a non-null stream.
void wait_stream_work(const Device& device, void* user_stream, const Deadline& deadline, std::string_view what);

/// A group's StreamOrders, one per device it has run collectives on, created on first use. Thread-safe.
class StreamOrders {
 public:
  explicit StreamOrders(Duration gate_timeout) : gate_timeout_(gate_timeout) {}
  StreamOrder& get(const Device& device);

 private:
  Duration gate_timeout_;
  std::mutex mu_;
  std::map<int, std::unique_ptr<StreamOrder>> orders_;  // by device index; -1 is the host
};

}  // namespace dcomm::runtime
