// The staging pipelines end to end without a network: device -> pinned chunks -> (a memcpy standing in for the
// host transport) -> pinned chunks -> device, for sizes around the chunk size and several pipeline depths.

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "tests/cuda/device_memory.hpp"
#include "transports/cuda_ipc/host_staging.hpp"

using namespace dcomm;
using namespace dcomm::transport::cuda_ipc;

namespace {

constexpr std::size_t kChunk = 1000;  // odd on purpose: chunks never line up with 16-byte vectors or pages

// Moves `bytes` through both pipelines; returns "" or what went wrong.
std::string round_trip(StagingPool& pool, std::size_t bytes, int depth) {
  std::vector<unsigned char> in(bytes);
  for (std::size_t i = 0; i < bytes; ++i) in[i] = static_cast<unsigned char>((i * 131 + bytes) % 251);
  test::DeviceMemory src(bytes), dst(bytes);
  src.upload(in.data(), bytes);
  cuda::check(cudaMemset(dst.data(), 0, bytes == 0 ? 1 : bytes), "memset");

  DeviceToHostPipeline out(pool, src.data(), bytes, depth);
  HostToDevicePipeline back(pool, dst.data(), bytes, depth);
  std::deque<StagedChunk> staged;  // chunks on the "wire": staged by the sender, not yet received
  Deadline deadline = Deadline::after(std::chrono::seconds(60));
  Backoff backoff;
  while (!(out.done() && back.done())) {
    if (deadline.expired()) return fmt::format("{} bytes depth {}: pipelines stuck", bytes, depth);
    bool moved = false;
    if (const StagedChunk* c = out.ready()) {
      staged.push_back(*c);
      moved = true;
    }
    if (!staged.empty()) {
      if (const StagedChunk* slot = back.next_slot()) {
        const StagedChunk c = staged.front();
        staged.pop_front();
        if (slot->index != c.index || slot->bytes != c.bytes) return "chunks out of step";
        std::memcpy(slot->host, c.host, c.bytes);
        out.sent(c.index);
        back.received(slot->index, c.bytes);
        moved = true;
      }
    }
    if (moved) backoff.reset(); else backoff.pause();
  }
  if (dst.download(bytes) != in) return fmt::format("{} bytes depth {}: data differs", bytes, depth);
  return {};
}

}  // namespace

TEST_CASE("device buffers survive staging through pinned chunks", "[cuda][staging]") {
  StagingPool pool(0, kChunk);
  std::vector<std::string> failures;
  for (int depth : {1, 2, 3}) {
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, kChunk - 1, kChunk, kChunk + 1, 7 * kChunk + 13}) {
      std::string f = round_trip(pool, bytes, depth);
      if (!f.empty()) failures.push_back(f);
    }
  }
  INFO(fmt::format("{} failures, first: {}", failures.size(), failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}
