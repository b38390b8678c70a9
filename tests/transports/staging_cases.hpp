#pragma once
// Staging cases: device buffers over host-only transports (transports/staging), every combination of device and
// host memory on either side, sizes around the chunk size, several messages on one tag, any-source receives and
// a receive too small for a staged message. Written once against DeviceAccess, so the same cases run with the fake
// stager on any machine (test_staging.cpp, mp_transports.cpp) and with CUDA on a GPU (tests/cuda).

#include <cstddef>

#include "tests/transports/conformance.hpp"

namespace dcomm::test {

/// The memory the cases treat as device memory, and how the test reaches it from the host.
class DeviceAccess {
 public:
  virtual ~DeviceAccess() = default;
  virtual Device device() const = 0;
  virtual void* alloc(std::size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void write(void* dst, const void* src, std::size_t bytes) = 0;  ///< host -> device
  virtual void read(void* dst, const void* src, std::size_t bytes) = 0;   ///< device -> host
};

/// Host memory labelled cuda:0, the device memory of FakeStager.
class FakeDeviceAccess final : public DeviceAccess {
 public:
  Device device() const override { return Device::cuda(0); }
  void* alloc(std::size_t bytes) override { return new char[bytes == 0 ? 1 : bytes]; }
  void release(void* p) override { delete[] static_cast<char*>(p); }
  void write(void* dst, const void* src, std::size_t bytes) override;
  void read(void* dst, const void* src, std::size_t bytes) override;
};

/// Runs every staging case on this rank of `mesh`; `chunk` is the stager's chunk size, around which sizes are chosen.
/// `mixed_tag_order`: whether host and device sends on one tag must match in send order, which holds when both take
/// one route (staging); with cuda_ipc as the device route they are two streams (docs/cuda.md), and the one-tag case
/// then sends device buffers only.
void run_staging_cases(transport::Mesh& mesh, RankLog& log, DeviceAccess& dev, std::size_t chunk,
                       bool mixed_tag_order = true);

}  // namespace dcomm::test
