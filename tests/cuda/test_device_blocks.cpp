// Device scratch (collectives/cuda/device_blocks.hpp): it must be exportable with cudaIpcGetMemHandle (algorithms
// send from it over cuda_ipc), reused rather than reallocated, bounded per device, and safe from several threads.
// Needs a GPU (exits 77 without one). The cache is process-wide, so every check is relative to what it held before.

#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "collectives/context.hpp"
#include "collectives/cuda/device_blocks.hpp"
#include "tests/cuda/device_memory.hpp"
#include "transports/cuda_ipc/ipc_memory.hpp"

using namespace dcomm;
using Limits = coll::DeviceBlockLimits;

TEST_CASE("device scratch can be exported for cuda_ipc, and keeps its handle when reused", "[cuda][scratch]") {
  cuda::check(cudaSetDevice(0), "cudaSetDevice");
  const std::size_t sizes[] = {1, 4099, (std::size_t{3} << 20) + 5};
  for (std::size_t bytes : sizes) {
    INFO("scratch of " << bytes << " bytes");
    uint64_t first_base = 0;
    cudaIpcMemHandle_t first{};
    {
      coll::Scratch s(bytes, Device::cuda(0));
      REQUIRE(s.data() != nullptr);
      // The whole block is usable device memory.
      cuda::check(cudaMemset(s.data(), 0x5A, bytes), "cudaMemset");
      transport::cuda_ipc::ExportedRange r = transport::cuda_ipc::export_range(s.data() + bytes / 2, true);
      CHECK(r.offset == bytes / 2);
      first_base = r.base;
      first = r.handle;
    }
    coll::Scratch again(bytes, Device::cuda(0));
    transport::cuda_ipc::ExportedRange r = transport::cuda_ipc::export_range(again.data(), true);
    CHECK(r.base == first_base);  // the same block came back from the cache
    CHECK(std::memcmp(&r.handle, &first, sizeof(first)) == 0);
  }
}

TEST_CASE("device blocks round up, and the cache keeps at most its limit", "[cuda][scratch]") {
  std::size_t capacity = 0;
  void* p = coll::take_device_block(0, 1000, &capacity);
  CHECK(capacity == Limits::kGranularity);
  coll::give_device_block(0, p, capacity);

  std::vector<std::pair<void*, std::size_t>> held;
  for (std::size_t i = 0; i < Limits::kMaxBlocks + 3; ++i) {
    const std::size_t want = Limits::kGranularity * (i + 1) - 7;
    held.emplace_back(coll::take_device_block(0, want, &capacity), capacity);
    CHECK(capacity >= want);  // a cached block from an earlier case may be larger
    CHECK(capacity % Limits::kGranularity == 0);
  }
  for (auto& [block, cap] : held) coll::give_device_block(0, block, cap);
  const coll::DeviceBlockStats stats = coll::device_block_stats(0);
  CHECK(stats.blocks == Limits::kMaxBlocks);
  CHECK(stats.bytes <= Limits::kMaxBytes);
  // The smallest went first: the largest block is still there, and a request for it needs no cudaMalloc.
  void* largest = held.back().first;
  void* again = coll::take_device_block(0, held.back().second, &capacity);
  CHECK(again == largest);
  coll::give_device_block(0, again, capacity);
}

TEST_CASE("device scratch from several threads at once stays within the limits", "[cuda][scratch]") {
  constexpr int kThreads = 4;
  constexpr int kRounds = 50;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      try {
        cuda::check(cudaSetDevice(0), "cudaSetDevice");
        for (int i = 0; i < kRounds; ++i) {
          const std::size_t bytes = static_cast<std::size_t>(1 + (t * 7 + i) % 5) * (Limits::kGranularity / 3);
          coll::Scratch s(bytes, Device::cuda(0));
          const unsigned char value = static_cast<unsigned char>(t * 31 + i);
          cuda::check(cudaMemset(s.data(), value, bytes), "cudaMemset");
          unsigned char last = 0;
          cuda::check(cudaMemcpy(&last, s.data() + bytes - 1, 1, cudaMemcpyDeviceToHost), "cudaMemcpy");
          if (last != value) ++failures;  // another thread wrote into this thread's block
        }
      } catch (...) {
        ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures.load() == 0);
  const coll::DeviceBlockStats stats = coll::device_block_stats(0);
  CHECK(stats.blocks <= Limits::kMaxBlocks);
  CHECK(stats.bytes <= Limits::kMaxBytes);
}
