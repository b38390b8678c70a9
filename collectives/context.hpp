#pragma once
// What an algorithm runs with: the call, the group, the deadline, and small helpers for tagged point-to-point
// messages among group ranks, reductions and scratch memory. One Context per collective call.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/engine.hpp"
#include "collectives/patterns.hpp"
#include "transports/mesh.hpp"

namespace dcomm::coll {

struct CallDescriptor;
struct SlotPlan;

/// Steps at and above this are reserved for the engine's call check; algorithms number theirs from 0.
inline constexpr uint32_t kCheckStepBase = 2016;

/// Memory for intermediate data, on the call's device.
class Scratch {
 public:
  Scratch() = default;
  /// Throws SystemError (ENOMEM) naming the bytes when host memory cannot be had.
  Scratch(std::size_t bytes, const Device& device);
  Scratch(Scratch&& other) noexcept;
  Scratch& operator=(Scratch&& other) noexcept;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch();
  char* data() { return data_; }

 private:
  char* data_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_{};
};

/// Throws SystemError (ENOMEM) naming the bytes when `bytes` of host memory cannot be allocated at all (under the
/// kernel's overcommit rules); takes and frees them at once.
void probe_host_memory(std::size_t bytes);

/// What an algorithm keeps on a group between calls (mapped shared memory, say). The engine owns it and drops it
/// with the group; destructors must not throw.
class AlgorithmState {
 public:
  virtual ~AlgorithmState() = default;
};

/// What a call found of its shared-memory windows (note_window_round, collectives/window_probe.hpp).
struct WindowsWatch {
  bool judged = false;  ///< the call moved data through windows filled with plain stores, and timed it
  bool slow = false;    ///< slower than non-temporal stores would have been, by the group's last measurement
};

class Context {
 public:
  /// `what` must outlive the context (the engine keeps one per algorithm, so a call builds no string).
  /// Inline: every call builds one (its dtype and device are its send buffer's, or its receive buffer's when the send
  /// side is empty: barrier has neither and counts bytes).
  Context(const Args& a, const GroupView& v, const Deadline& d, uint64_t s, std::string_view w, std::size_t chunk)
      : Context(a, v, d, s, w, chunk, a.send.data != nullptr || a.send.count > 0 ? a.send : a.recv) {}

  const Args& args;
  const GroupView& view;
  const Deadline& deadline;
  const uint64_t seq;
  const std::string_view what;    ///< "all_reduce[ring] rank 2/4": starts every error message
  const std::size_t chunk_bytes;  ///< pipelining unit

  /// The buffer a reducing collective combines in (the engine prepares it: input copied, pre-scaled); null
  /// for the others.
  char* work = nullptr;
  /// Elements in `work`.
  std::size_t work_count = 0;
  /// This rank's input for a reducing collective: `work` (already holding it), or args.send's data for an
  /// algorithm that takes its input itself (Algorithm::takes_input), whose `work` then starts undefined.
  const char* input = nullptr;
  /// reduce_scatter: run() wrote this rank's block of the result into args.recv itself (reduce_scatter[cma]), so
  /// the engine copies nothing out of `work` after it.
  bool wrote_output = false;
  /// This algorithm's state on this group (empty until it stores some); null when the caller keeps none.
  std::unique_ptr<AlgorithmState>* state = nullptr;
  /// For an algorithm that carries out the call check itself (Algorithm::fuses_check): this rank's call, to check
  /// with check_calls_match() before any other message. Null when the engine checked already or checks are off.
  const CallDescriptor* call = nullptr;
  /// For <collective>[slot]: the exchange's fixed part when the engine planned it for this call's shape (slots.hpp,
  /// SlotPlan), made for the `call` above; null: the row plans the exchange itself.
  const SlotPlan* slot_plan = nullptr;
  /// Set by the engine where it can measure the windows again (window_probe.hpp): a row that moved data through
  /// windows filled with plain stores judges them (note_window_round). Null: nobody listens.
  WindowsWatch* windows = nullptr;

  /// The same call on a part of the group (a node, the leaders, a rail: collectives/topology.hpp), so that the
  /// building blocks run on it unchanged; its steps are numbered from `step_base` (on top of this context's), so
  /// that its messages keep apart from the other phases' between the same two ranks. Keeps work and work_count;
  /// no state and no call check. `sub` must outlive the context, and this rank must be in it.
  Context on(const GroupView& sub, uint32_t step_base) const;

  int rank() const { return view.rank; }
  int size() const { return view.size; }
  DType dtype() const { return dtype_; }
  std::size_t esize() const { return esize_; }
  const Device& device() const { return device_; }
  /// The combining op: avg and premul_sum combine as sum (the engine scales before and divides after).
  ReduceOp op() const;
  /// Elements per pipelining piece (at least 1).
  std::size_t chunk_elems() const;

  /// Byte address of element `elem` of `base`.
  char* at(void* base, std::size_t elem) const { return static_cast<char*>(base) + elem * esize_; }
  const char* at(const void* base, std::size_t elem) const { return static_cast<const char*>(base) + elem * esize_; }

  // Point-to-point among group ranks; `step` tells an algorithm's phases apart (< kCheckStepBase).
  transport::RequestPtr isend(int peer, uint32_t step, const void* data, std::size_t bytes) const;
  transport::RequestPtr irecv(int peer, uint32_t step, void* data, std::size_t bytes) const;
  /// Waits; a receive must get exactly the bytes it asked for (else the ranks' calls disagree).
  void wait(const transport::RequestPtr& r) const;
  /// Waits for a receive that may get fewer bytes than it has room for; returns the bytes received.
  std::size_t wait_received(const transport::RequestPtr& r) const;
  void wait_all(std::vector<transport::RequestPtr>& rs) const;
  void send(int peer, uint32_t step, const void* data, std::size_t bytes) const;
  void recv(int peer, uint32_t step, void* data, std::size_t bytes) const;
  void sendrecv(int to, const void* sdata, std::size_t sbytes, int from, void* rdata, std::size_t rbytes,
                uint32_t step) const;

  // Element operations on the call's dtype and device.
  void reduce(void* dst, const void* src, std::size_t count) const;
  void copy(void* dst, const void* src, std::size_t count) const;
  /// Throws SystemError (host) or CudaError naming this call and the bytes when the memory cannot be had.
  Scratch scratch(std::size_t count) const;

 private:
  Context(const Args& a, const GroupView& v, const Deadline& d, uint64_t s, std::string_view w, std::size_t chunk,
          const Buffer& primary)
      : args(a),
        view(v),
        deadline(d),
        seq(s),
        what(w),
        chunk_bytes(chunk),
        dtype_(primary.dtype),
        esize_(dtype_size(primary.dtype)),
        device_(primary.device) {}

  DType dtype_;
  std::size_t esize_;
  Device device_;
  uint32_t step_base_ = 0;
};

}  // namespace dcomm::coll
