#include "runtime/cuda/stream_order.hpp"

#include <dcomm/error.hpp>
#include <fmt/format.h>

#include <atomic>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "dcomm_config.h"

#if DCOMM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "collectives/cuda/reduce_cuda.hpp"
#include "collectives/cuda/stream_gate.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"
#endif

namespace dcomm::runtime {

#if DCOMM_HAVE_CUDA

// The host-mapped words the gate kernels read: the last finished ticket, and a flag a gate sets when it gave up.
struct GateWords {
  uint64_t finished;
  uint32_t timed_out;
};

namespace {

// Gate words are never freed: a gate kernel queued behind the caller's work may read them long after its group is
// gone. They come from pinned, mapped pages of 256 slots (16 bytes per group ever created), shared by all devices.
GateWords* allocate_gate_words() {
  constexpr std::size_t kSlotsPerPage = 256;
  static std::mutex mu;
  static GateWords* page = nullptr;
  static std::size_t used = kSlotsPerPage;
  std::lock_guard<std::mutex> lock(mu);
  if (used == kSlotsPerPage) {
    void* p = nullptr;
    cuda::check(cudaHostAlloc(&p, kSlotsPerPage * sizeof(GateWords), cudaHostAllocMapped | cudaHostAllocPortable),
                "StreamOrder: cudaHostAlloc of the gate words");
    page = static_cast<GateWords*>(p);
    used = 0;
  }
  return new (&page[used++]) GateWords{0, 0};
}

}  // namespace

struct StreamOrder::State {
  Device device;
  Duration gate_timeout;
  cudaStream_t stream = nullptr;
  GateWords* words = nullptr;         // host view
  GateWords* device_words = nullptr;  // the same memory as the device addresses it
  std::mutex mu;
  uint64_t next_ticket = 1;
  std::map<uint64_t, cudaEvent_t> inputs;  // tickets whose input has not been seen complete yet
  std::vector<cudaEvent_t> spare_events;
};

StreamOrder::StreamOrder(Device device, Duration gate_timeout) : state_(std::make_unique<State>()) {
  state_->device = device;
  state_->gate_timeout = gate_timeout;
  if (device.is_host()) return;
  cuda::DeviceGuard guard(device.index);
  cuda::check(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking), "StreamOrder: cudaStreamCreate");
  state_->words = allocate_gate_words();
  void* device_words = nullptr;
  cuda::check(cudaHostGetDevicePointer(&device_words, state_->words, 0), "StreamOrder: cudaHostGetDevicePointer");
  state_->device_words = static_cast<GateWords*>(device_words);
}

StreamOrder::~StreamOrder() {
  if (state_->device.is_host()) return;
  // Release every gate, queued or yet to start, so no caller's stream waits on a group that is gone. Streams and
  // events still in use are released by CUDA once their work completes, so nothing here blocks.
  finish(UINT64_MAX);
  for (auto& [ticket, ev] : state_->inputs) (void)cudaEventDestroy(ev);
  for (cudaEvent_t ev : state_->spare_events) (void)cudaEventDestroy(ev);
  if (state_->stream) (void)cudaStreamDestroy(state_->stream);
  (void)cudaGetLastError();
}

const Device& StreamOrder::device() const noexcept { return state_->device; }
void* StreamOrder::stream() const noexcept { return state_->stream; }

uint64_t StreamOrder::record_input(void* user_stream) {
  std::lock_guard<std::mutex> lock(state_->mu);
  const uint64_t ticket = state_->next_ticket++;
  if (state_->device.is_host()) return ticket;
  cuda::DeviceGuard guard(state_->device.index);
  cudaEvent_t ev = nullptr;
  if (!state_->spare_events.empty()) {
    ev = state_->spare_events.back();
    state_->spare_events.pop_back();
  } else {
    cuda::check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "record_input: cudaEventCreate");
  }
  state_->inputs.emplace(ticket, ev);
  const auto user = static_cast<cudaStream_t>(user_stream);
  cuda::check(cudaEventRecord(ev, user), fmt::format("record_input: cudaEventRecord on the caller's stream {}",
                                                     user_stream));
  cuda::check(cudaStreamWaitEvent(state_->stream, ev, 0), "record_input: cudaStreamWaitEvent");
  return ticket;
}

bool StreamOrder::input_ready(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->inputs.find(ticket);
  if (it == state_->inputs.end()) return true;
  cudaError_t err = cudaEventQuery(it->second);
  if (err == cudaErrorNotReady) return false;
  // Ready or failed: either way the event is done with; a failure is the caller's stream's own error to report.
  state_->spare_events.push_back(it->second);
  state_->inputs.erase(it);
  if (err != cudaSuccess) cuda::throw_error(err, "the work queued on the caller's stream before the collective");
  return true;
}

void StreamOrder::wait_input(uint64_t ticket, const Deadline& deadline, std::string_view what) {
  Backoff backoff(std::chrono::microseconds(200));
  while (!input_ready(ticket)) {
    if (deadline.expired()) {
      throw TimeoutError(fmt::format("{}: the work queued on the caller's CUDA stream before the call is not done "
                                     "after {} (timeout {}); a kernel there may be stuck or waiting on this rank",
                                     what, format_duration(deadline.elapsed()), format_duration(deadline.timeout())));
    }
    backoff.pause();
  }
}

void StreamOrder::complete_on(uint64_t ticket, void* user_stream) {
  if (state_->device.is_host()) return;
  if (std::atomic_ref<uint64_t>(state_->words->finished).load(std::memory_order_acquire) >= ticket) return;
  cuda::DeviceGuard guard(state_->device.index);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(state_->gate_timeout).count();
  coll::queue_counter_wait(user_stream, &state_->device_words->finished, ticket, static_cast<uint64_t>(ns),
                           &state_->device_words->timed_out);
}

void StreamOrder::finish(uint64_t ticket) noexcept {
  if (state_->device.is_host()) return;
  std::atomic_ref<uint64_t> finished(state_->words->finished);
  uint64_t seen = finished.load(std::memory_order_relaxed);
  while (seen < ticket && !finished.compare_exchange_weak(seen, ticket, std::memory_order_release)) {
  }
}

bool StreamOrder::gate_timed_out() const noexcept {
  if (state_->device.is_host()) return false;
  return std::atomic_ref<uint32_t>(state_->words->timed_out).load(std::memory_order_acquire) != 0;
}

// The order matters: members are destroyed in reverse, so the stream scope ends before the device is restored.
struct CollectiveScope::Cuda {
  cuda::DeviceGuard device;
  coll::StreamScope stream;
  Cuda(int index, void* s) : device(index), stream(s) {}
};

CollectiveScope::CollectiveScope(StreamOrder& order, uint64_t ticket, const Deadline& deadline,
                                 std::string_view what)
    : order_(order), ticket_(ticket) {
  try {
    if (order.device().is_host()) return;
    cuda_ = std::make_unique<Cuda>(order.device().index, order.stream());
    order.wait_input(ticket, deadline, what);
  } catch (...) {
    order.finish(ticket);  // the destructor will not run; nothing may stay gated on this ticket
    throw;
  }
}

void wait_stream_work(const Device& device, void* user_stream, const Deadline& deadline, std::string_view what) {
  if (device.is_host()) return;
  cuda::DeviceGuard guard(device.index);
  cudaEvent_t ev = nullptr;
  cuda::check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), fmt::format("{}: cudaEventCreate", what));
  struct Destroy {
    cudaEvent_t ev;
    ~Destroy() { (void)cudaEventDestroy(ev); }
  } destroy{ev};
  cuda::check(cudaEventRecord(ev, static_cast<cudaStream_t>(user_stream)),
              fmt::format("{}: cudaEventRecord on the caller's stream {}", what, user_stream));
  cuda::wait_event(ev, deadline, fmt::format("{}: the work queued on the caller's CUDA stream before the call", what));
}

#else  // host-only build: there are no streams to order against

struct StreamOrder::State {
  Device device;
  uint64_t next_ticket = 1;
};

StreamOrder::StreamOrder(Device device, Duration) : state_(std::make_unique<State>()) {
  if (!device.is_host()) {
    throw InvalidUsageError(fmt::format("stream ordering on {}: dcomm was built without CUDA", to_string(device)));
  }
}
StreamOrder::~StreamOrder() = default;
const Device& StreamOrder::device() const noexcept { return state_->device; }
void* StreamOrder::stream() const noexcept { return nullptr; }
uint64_t StreamOrder::record_input(void* user_stream) {
  if (user_stream != nullptr) {
    throw InvalidUsageError("a CUDA stream was given but dcomm was built without CUDA; pass a null stream");
  }
  return state_->next_ticket++;
}
bool StreamOrder::input_ready(uint64_t) { return true; }
void StreamOrder::wait_input(uint64_t, const Deadline&, std::string_view) {}
void StreamOrder::complete_on(uint64_t, void* user_stream) {
  if (user_stream != nullptr) {
    throw InvalidUsageError("Work::wait_stream was given a CUDA stream but dcomm was built without CUDA");
  }
}
void StreamOrder::finish(uint64_t) noexcept {}
bool StreamOrder::gate_timed_out() const noexcept { return false; }

struct CollectiveScope::Cuda {};
CollectiveScope::CollectiveScope(StreamOrder& order, uint64_t ticket, const Deadline&, std::string_view)
    : order_(order), ticket_(ticket) {}

void wait_stream_work(const Device&, void* user_stream, const Deadline&, std::string_view what) {
  if (user_stream != nullptr) {
    throw InvalidUsageError(fmt::format("{}: a CUDA stream was given but dcomm was built without CUDA; pass a null "
                                        "stream",
                                        what));
  }
}

#endif

CollectiveScope::~CollectiveScope() {
  cuda_.reset();
  order_.finish(ticket_);
}

StreamOrder& StreamOrders::get(const Device& device) {
  std::lock_guard<std::mutex> lock(mu_);
  const int key = device.is_host() ? -1 : device.index;
  auto& slot = orders_[key];
  if (!slot) slot = std::make_unique<StreamOrder>(device, gate_timeout_);
  return *slot;
}

}  // namespace dcomm::runtime
