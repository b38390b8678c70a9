#include "transports/cuda_ipc/host_staging.hpp"

#include <cuda_runtime_api.h>
#include <dcomm/error.hpp>
#include <fmt/format.h>

#include <algorithm>

#include "transports/cuda_ipc/cuda_check.hpp"

namespace dcomm::transport::cuda_ipc {
namespace {

enum class SlotState { kFree, kCopying, kHandedOut };

// cudaEventQuery as a yes/no; a failed copy throws, naming the staging step.
bool copy_finished(cudaEvent_t ev, const char* what, std::size_t index) {
  cudaError_t err = cudaEventQuery(ev);
  if (err == cudaErrorNotReady) return false;
  if (err != cudaSuccess) cuda::throw_error(err, fmt::format("host staging: {} of chunk {}", what, index));
  return true;
}

std::size_t chunk_count(std::size_t bytes, std::size_t chunk) { return (bytes + chunk - 1) / chunk; }

}  // namespace

// ---- StagingPool

StagingPool::StagingPool(int device, std::size_t chunk_bytes) : device_(device), chunk_bytes_(chunk_bytes) {
  if (chunk_bytes == 0) throw InvalidUsageError("host staging: the chunk size must be at least 1 byte");
  cuda::DeviceGuard guard(device);
  cudaStream_t s = nullptr;
  cuda::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "host staging: cudaStreamCreate");
  stream_ = s;
}

StagingPool::~StagingPool() {
  (void)cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));  // copies always end; nothing waits on peers
  for (void* p : all_) (void)cudaFreeHost(p);
  (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  (void)cudaGetLastError();
}

void* StagingPool::acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!free_.empty()) {
    void* p = free_.back();
    free_.pop_back();
    return p;
  }
  void* p = nullptr;
  cuda::check(cudaHostAlloc(&p, chunk_bytes_, cudaHostAllocPortable),
              fmt::format("host staging: cudaHostAlloc of a {} chunk (pinned memory is limited by ulimit -l and "
                          "physical memory; use a smaller chunk)", format_bytes(chunk_bytes_)));
  all_.push_back(p);
  return p;
}

void StagingPool::release(void* chunk) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(chunk);
}

// ---- Slots shared by both pipelines: a pinned chunk and the event of its last copy.

struct SlotBase {
  StagingPool& pool;
  void* host;
  cudaEvent_t event = nullptr;
  SlotState state = SlotState::kFree;
  std::size_t index = 0;
  explicit SlotBase(StagingPool& p) : pool(p), host(p.acquire()) {
    cuda::check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "host staging: cudaEventCreate");
  }
  ~SlotBase() {
    // A copy into or out of the slot may still run; the chunk goes back to the pool only after it.
    (void)cudaEventSynchronize(event);
    (void)cudaEventDestroy(event);
    pool.release(host);
    (void)cudaGetLastError();
  }
  SlotBase(const SlotBase&) = delete;
  SlotBase& operator=(const SlotBase&) = delete;
};

struct DeviceToHostPipeline::Slot : SlotBase {
  using SlotBase::SlotBase;
};
struct HostToDevicePipeline::Slot : SlotBase {
  using SlotBase::SlotBase;
};

// ---- DeviceToHostPipeline

DeviceToHostPipeline::DeviceToHostPipeline(StagingPool& pool, const void* src, std::size_t bytes, int depth)
    : pool_(pool), src_(static_cast<const char*>(src)), bytes_(bytes),
      chunks_(chunk_count(bytes, pool.chunk_bytes())) {
  cuda::DeviceGuard guard(pool.device());
  const std::size_t n = std::min<std::size_t>(chunks_, depth < 1 ? 1 : static_cast<std::size_t>(depth));
  for (std::size_t i = 0; i < n; ++i) slots_.push_back(std::make_unique<Slot>(pool));
  start_copies();
}

DeviceToHostPipeline::~DeviceToHostPipeline() = default;

void DeviceToHostPipeline::start_copies() {
  const std::size_t chunk = pool_.chunk_bytes();
  while (next_copy_ < chunks_) {
    Slot& s = *slots_[next_copy_ % slots_.size()];
    if (s.state != SlotState::kFree) return;
    const std::size_t offset = next_copy_ * chunk;
    const std::size_t n = std::min(chunk, bytes_ - offset);
    auto stream = static_cast<cudaStream_t>(pool_.stream());
    cuda::check(cudaMemcpyAsync(s.host, src_ + offset, n, cudaMemcpyDeviceToHost, stream),
                fmt::format("host staging: device-to-host copy of chunk {} ({})", next_copy_, format_bytes(n)));
    cuda::check(cudaEventRecord(s.event, stream), "host staging: cudaEventRecord");
    s.state = SlotState::kCopying;
    s.index = next_copy_++;
  }
}

const StagedChunk* DeviceToHostPipeline::ready() {
  if (next_ready_ >= next_copy_) return nullptr;
  Slot& s = *slots_[next_ready_ % slots_.size()];
  if (!copy_finished(s.event, "device-to-host copy", s.index)) return nullptr;
  s.state = SlotState::kHandedOut;
  const std::size_t offset = next_ready_ * pool_.chunk_bytes();
  current_ = StagedChunk{next_ready_++, s.host, std::min(pool_.chunk_bytes(), bytes_ - offset)};
  return &current_;
}

void DeviceToHostPipeline::sent(std::size_t index) {
  Slot& s = *slots_.at(index % slots_.size());
  if (s.state != SlotState::kHandedOut || s.index != index) {
    throw Error(ErrorCode::kInternal, fmt::format("host staging: chunk {} reported sent but it was not handed out",
                                                  index));
  }
  s.state = SlotState::kFree;
  ++sent_;
  start_copies();
}

// ---- HostToDevicePipeline

HostToDevicePipeline::HostToDevicePipeline(StagingPool& pool, void* dst, std::size_t bytes, int depth)
    : pool_(pool), dst_(static_cast<char*>(dst)), bytes_(bytes), chunks_(chunk_count(bytes, pool.chunk_bytes())) {
  cuda::DeviceGuard guard(pool.device());
  const std::size_t n = std::min<std::size_t>(chunks_, depth < 1 ? 1 : static_cast<std::size_t>(depth));
  for (std::size_t i = 0; i < n; ++i) slots_.push_back(std::make_unique<Slot>(pool));
}

HostToDevicePipeline::~HostToDevicePipeline() = default;

HostToDevicePipeline::Slot& HostToDevicePipeline::slot_of(std::size_t index) {
  Slot& s = *slots_.at(index % slots_.size());
  // A slot whose copy to the device has finished is free again.
  if (s.state == SlotState::kCopying && copy_finished(s.event, "host-to-device copy", s.index)) {
    s.state = SlotState::kFree;
    ++copied_;
  }
  return s;
}

const StagedChunk* HostToDevicePipeline::next_slot() {
  if (next_slot_ >= chunks_) return nullptr;
  Slot& s = slot_of(next_slot_);
  if (s.state != SlotState::kFree) return nullptr;
  s.state = SlotState::kHandedOut;
  s.index = next_slot_;
  const std::size_t offset = next_slot_ * pool_.chunk_bytes();
  current_ = StagedChunk{next_slot_++, s.host, std::min(pool_.chunk_bytes(), bytes_ - offset)};
  return &current_;
}

void HostToDevicePipeline::received(std::size_t index, std::size_t bytes) {
  Slot& s = *slots_.at(index % slots_.size());
  const std::size_t offset = index * pool_.chunk_bytes();
  if (s.state != SlotState::kHandedOut || s.index != index || offset + bytes > bytes_) {
    throw Error(ErrorCode::kInternal, fmt::format("host staging: chunk {} of {} received but not expected there",
                                                  index, format_bytes(bytes)));
  }
  auto stream = static_cast<cudaStream_t>(pool_.stream());
  cuda::check(cudaMemcpyAsync(dst_ + offset, s.host, bytes, cudaMemcpyHostToDevice, stream),
              fmt::format("host staging: host-to-device copy of chunk {} ({})", index, format_bytes(bytes)));
  cuda::check(cudaEventRecord(s.event, stream), "host staging: cudaEventRecord");
  s.state = SlotState::kCopying;
}

bool HostToDevicePipeline::done() {
  for (std::size_t i = 0; i < slots_.size(); ++i) slot_of(i);
  return copied_ == chunks_;
}

}  // namespace dcomm::transport::cuda_ipc
