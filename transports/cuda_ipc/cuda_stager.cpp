#include "transports/cuda_ipc/cuda_stager.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <map>
#include <mutex>
#include <vector>

#include <dcomm/error.hpp>

#include "transports/cuda_ipc/cuda_check.hpp"

namespace dcomm::transport::cuda_ipc {
namespace {

/// One device's pinned chunks and its two copy streams.
class DevicePool {
 public:
  DevicePool(int device, std::size_t chunk_bytes) : device_(device), chunk_bytes_(chunk_bytes) {
    cuda::DeviceGuard guard(device);
    cuda::check(cudaStreamCreateWithFlags(&down_, cudaStreamNonBlocking), "staging: cudaStreamCreate");
    cudaError_t err = cudaStreamCreateWithFlags(&up_, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
      (void)cudaStreamDestroy(down_);
      cuda::throw_error(err, "staging: cudaStreamCreate");
    }
  }
  ~DevicePool() {
    // Every slot has gone (each waited for its own copy), so the streams are idle.
    for (void* p : all_) (void)cudaFreeHost(p);
    (void)cudaStreamDestroy(down_);
    (void)cudaStreamDestroy(up_);
    (void)cudaGetLastError();
  }
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  int device() const { return device_; }
  cudaStream_t down() const { return down_; }
  cudaStream_t up() const { return up_; }

  void* acquire() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      void* p = free_.back();
      free_.pop_back();
      return p;
    }
    void* p = nullptr;
    cuda::DeviceGuard guard(device_);
    cuda::check(cudaHostAlloc(&p, chunk_bytes_, cudaHostAllocPortable),
                fmt::format("staging: cudaHostAlloc of a {} chunk for cuda:{} (pinned memory is limited by ulimit -l "
                            "and physical memory; lower DCOMM_STAGING_CHUNK_BYTES or DCOMM_STAGING_DEPTH)",
                            format_bytes(chunk_bytes_), device_));
    all_.push_back(p);
    return p;
  }
  void release(void* chunk) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(chunk);
  }

 private:
  int device_;
  std::size_t chunk_bytes_;
  cudaStream_t down_ = nullptr;
  cudaStream_t up_ = nullptr;
  std::mutex mu_;
  std::vector<void*> free_;
  std::vector<void*> all_;
};

class CudaSlot final : public staging::Slot {
 public:
  explicit CudaSlot(DevicePool& pool) : pool_(pool), host_(pool.acquire()) {
    cuda::DeviceGuard guard(pool.device());
    cudaError_t err = cudaEventCreateWithFlags(&event_, cudaEventDisableTiming);
    if (err != cudaSuccess) {
      pool_.release(host_);
      cuda::throw_error(err, "staging: cudaEventCreate");
    }
  }
  ~CudaSlot() override {
    // A copy into or out of the chunk may still run; the chunk goes back to the pool only after it. Copies need
    // no peer, so this wait always ends.
    if (queued_) (void)cudaEventSynchronize(event_);
    (void)cudaEventDestroy(event_);
    pool_.release(host_);
    (void)cudaGetLastError();
  }

  void* host() override { return host_; }
  void to_host(const void* src, std::size_t bytes) override {
    copy(host_, src, bytes, cudaMemcpyDeviceToHost, pool_.down(), "device-to-host");
  }
  void to_device(void* dst, std::size_t bytes) override {
    copy(dst, host_, bytes, cudaMemcpyHostToDevice, pool_.up(), "host-to-device");
  }
  bool idle() override {
    if (!queued_) return true;
    cudaError_t err = cudaEventQuery(event_);
    if (err == cudaErrorNotReady) return false;
    queued_ = false;
    if (err != cudaSuccess) {
      cuda::throw_error(err, fmt::format("staging: the {} copy through a pinned chunk on cuda:{}", what_,
                                         pool_.device()));
    }
    return true;
  }

 private:
  void copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t stream,
            const char* what) {
    cuda::DeviceGuard guard(pool_.device());
    what_ = what;
    cuda::check(cudaMemcpyAsync(dst, src, bytes, kind, stream),
                fmt::format("staging: {} copy of {} on cuda:{}", what, format_bytes(bytes), pool_.device()));
    cuda::check(cudaEventRecord(event_, stream), "staging: cudaEventRecord");
    queued_ = true;
  }

  DevicePool& pool_;
  void* host_;
  cudaEvent_t event_ = nullptr;
  bool queued_ = false;
  const char* what_ = "";
};

class CudaStager final : public staging::Stager {
 public:
  CudaStager(std::size_t chunk_bytes, int depth) : chunk_bytes_(chunk_bytes), depth_(depth) {}
  bool handles(const Device& device) const override { return device.kind == Device::Kind::kCuda; }
  std::size_t chunk_bytes() const override { return chunk_bytes_; }
  int depth() const override { return depth_; }
  std::unique_ptr<staging::Slot> slot(const Device& device) override {
    if (!handles(device)) {
      throw InvalidUsageError(fmt::format("staging: the CUDA stager cannot copy {} memory", to_string(device)));
    }
    return std::make_unique<CudaSlot>(pool(device.index));
  }

 private:
  DevicePool& pool(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& p = pools_[device];
    if (!p) p = std::make_unique<DevicePool>(device, chunk_bytes_);
    return *p;
  }
  std::size_t chunk_bytes_;
  int depth_;
  std::mutex mu_;
  std::map<int, std::unique_ptr<DevicePool>> pools_;
};

}  // namespace

std::shared_ptr<staging::Stager> make_cuda_stager(std::size_t chunk_bytes, int depth) {
  if (chunk_bytes == 0 || depth < 1) {
    throw InvalidUsageError(fmt::format("staging: chunk size {} and depth {} must both be at least 1", chunk_bytes,
                                        depth));
  }
  return std::make_shared<CudaStager>(chunk_bytes, depth);
}

}  // namespace dcomm::transport::cuda_ipc
