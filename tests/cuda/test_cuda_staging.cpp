// Staging on a GPU: the CUDA stager's pinned chunks and copies (transports/cuda_ipc/cuda_stager.cpp) under the
// Download/Upload pipelines, then the staging cases of tests/transports (device buffers over host transports, every
// memory combination, sizes around the chunk) with ranks as threads over loopback and shm, and the same cases with
// cuda_ipc as the device route.

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "tests/cuda/device_memory.hpp"
#include "tests/transports/staging_cases.hpp"
#include "tests/transports/world.hpp"
#include "transports/cuda_ipc/cuda_stager.hpp"
#include "transports/staging/pipelines.hpp"

using namespace dcomm;
using transport::staging::Download;
using transport::staging::HostChunk;
using transport::staging::Upload;

namespace {

constexpr std::size_t kChunk = 1000;  // odd on purpose: chunks never line up with 16-byte vectors or pages

// Moves `bytes` device -> pinned chunks -> (a memcpy standing in for the host transport) -> pinned chunks -> device.
std::string round_trip(transport::staging::Stager& stager, std::size_t bytes) {
  std::vector<unsigned char> in(bytes);
  for (std::size_t i = 0; i < bytes; ++i) in[i] = static_cast<unsigned char>((i * 131 + bytes) % 251);
  test::DeviceMemory src(bytes), dst(bytes);
  src.upload(in.data(), bytes);
  cuda::check(cudaMemset(dst.data(), 0, bytes == 0 ? 1 : bytes), "memset");
  test::settle_legacy_stream();
  Download out(stager, Device::cuda(0), src.data(), bytes);
  Upload back(stager, Device::cuda(0), dst.data(), bytes);
  std::deque<HostChunk> wire;  // staged by the sender, not yet received
  Deadline deadline = Deadline::after(std::chrono::seconds(60));
  Backoff backoff;
  while (!(out.done() && back.done())) {
    if (deadline.expired()) return fmt::format("{} bytes: pipelines stuck", bytes);
    bool moved = false;
    HostChunk c;
    if (out.ready(&c)) {
      wire.push_back(c);
      moved = true;
    }
    if (!wire.empty()) {
      if (void* slot = back.lend(wire.front().index)) {
        const HostChunk w = wire.front();
        wire.pop_front();
        std::memcpy(slot, w.data, w.bytes);
        out.sent(w.index);
        back.filled(w.index);
        moved = true;
      }
    }
    if (moved) backoff.reset(); else backoff.pause();
  }
  if (dst.download(bytes) != in) return fmt::format("{} bytes: data differs", bytes);
  return {};
}

class CudaDeviceAccess final : public test::DeviceAccess {
 public:
  Device device() const override { return Device::cuda(0); }
  void* alloc(std::size_t bytes) override {
    void* p = nullptr;
    cuda::check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "test cudaMalloc");
    return p;
  }
  void release(void* p) override { (void)cudaFree(p); }
  void write(void* dst, const void* src, std::size_t n) override {
    cuda::check(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice), "test write");
    test::settle_legacy_stream();
  }
  void read(void* dst, const void* src, std::size_t n) override {
    cuda::check(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost), "test read");
  }
};

}  // namespace

TEST_CASE("device buffers survive the CUDA stager's pinned chunks", "[cuda][staging]") {
  std::vector<std::string> failures;
  for (int depth : {1, 2, 3}) {
    auto stager = transport::cuda_ipc::make_cuda_stager(kChunk, depth);
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, kChunk - 1, kChunk, kChunk + 1, 7 * kChunk + 13}) {
      std::string f = round_trip(*stager, bytes);
      if (!f.empty()) failures.push_back(fmt::format("depth {}: {}", depth, f));
    }
  }
  INFO(fmt::format("{} failures, first: {}", failures.size(), failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}

TEST_CASE("device buffers cross host transports through the CUDA stager", "[cuda][staging]") {
  for (const char* name : {"loopback", "shm"}) {
    for (int world : {2, 3}) {
      INFO("transport " << name << ", " << world << " ranks");
      auto stager = transport::cuda_ipc::make_cuda_stager(kChunk, 3);
      CudaDeviceAccess dev;
      auto failures = test::run_world(
          name, world, [&](transport::Mesh& m, test::RankLog& log) { test::run_staging_cases(m, log, dev, kChunk); },
          [&](transport::MeshOptions& o) { o.stager = stager; });
      for (const auto& f : failures) UNSCOPED_INFO(f);
      CHECK(failures.empty());
    }
  }
}

TEST_CASE("the staging cases pass with cuda_ipc as the device route", "[cuda][staging][cuda_ipc]") {
  // No forced transport: device buffers between these threads take cuda_ipc, host buffers shm; host -> device
  // messages come over shm and are uploaded by its staging wrapper with the default (CUDA) stager.
  for (int world : {2, 3}) {
    INFO(world << " ranks");
    CudaDeviceAccess dev;
    auto failures = test::run_world(
        "", world,
        [&](transport::Mesh& m, test::RankLog& log) {
          test::run_staging_cases(m, log, dev, kChunk, /*mixed_tag_order=*/false);
        });
    for (const auto& f : failures) UNSCOPED_INFO(f);
    CHECK(failures.empty());
  }
}
