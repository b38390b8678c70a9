// The Mesh with device buffers, ranks as threads of one process: host messages keep their host route (shm or loopback),
// device messages take the device route (cuda_ipc, which copies straight from the sender's pointer between ranks of
// one process), and a host-memory message matched by a device receive arrives over the host route, uploaded by
// the staging wrapper.

#include <catch2/catch.hpp>

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/cuda/device_memory.hpp"
#include "transports/mesh.hpp"

using namespace dcomm;

namespace {

constexpr int kWorld = 3;
constexpr std::size_t kBytes = (std::size_t{1} << 20) + 3;

unsigned char byte_at(int src, int dst, std::size_t i) {
  return static_cast<unsigned char>((src * 5 + dst * 11 + i) % 253);
}

void rank_body(transport::Mesh& mesh, std::vector<std::string>& failures) {
  const int me = mesh.rank();
  const Deadline deadline = Deadline::after(std::chrono::seconds(60));
  auto wait = [&](transport::Request& r) { mesh.wait(r, deadline, fmt::format("rank {}", me)); };
  std::vector<std::unique_ptr<test::DeviceMemory>> outs, ins;
  std::vector<transport::RequestPtr> reqs;
  for (int p = 0; p < kWorld; ++p) {
    if (p == me) continue;
    if (std::string(mesh.transport_name(p)) == "cuda_ipc") failures.push_back("host route is cuda_ipc");
    std::vector<unsigned char> data(kBytes);
    for (std::size_t i = 0; i < kBytes; ++i) data[i] = byte_at(me, p, i);
    outs.push_back(std::make_unique<test::DeviceMemory>(kBytes));
    outs.back()->upload(data.data(), kBytes);
    ins.push_back(std::make_unique<test::DeviceMemory>(kBytes));
    reqs.push_back(mesh.irecv(p, 1, ins.back()->data(), kBytes, Device::cuda(0)));
    reqs.push_back(mesh.isend(p, 1, outs.back()->data(), kBytes, Device::cuda(0)));
  }
  for (auto& r : reqs) wait(*r);
  for (int p = 0, k = 0; p < kWorld; ++p) {
    if (p == me) continue;
    if (reqs[static_cast<std::size_t>(2 * k)]->transport == nullptr ||
        std::string(reqs[static_cast<std::size_t>(2 * k)]->transport->name()) != "cuda_ipc") {
      failures.push_back(fmt::format("device message from rank {} did not come over cuda_ipc", p));
    }
    std::vector<unsigned char> got = ins[static_cast<std::size_t>(k++)]->download(kBytes);
    for (std::size_t i = 0; i < kBytes; ++i) {
      if (got[i] != byte_at(p, me, i)) {
        failures.push_back(fmt::format("device message from rank {} differs at byte {}", p, i));
        break;
      }
    }
  }
  // A host message into a device receive comes over the host route: StagedTransport receives it into host memory
  // and uploads it (a host transport never memcpys into device memory).
  const int next = (me + 1) % kWorld, prev = (me + kWorld - 1) % kWorld;
  std::vector<unsigned char> host(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) host[i] = byte_at(me, next, i + 7);
  test::DeviceMemory dev(kBytes);
  auto s = mesh.isend(next, 2, host.data(), host.size());
  auto r = mesh.irecv(prev, 2, dev.data(), dev.bytes(), Device::cuda(0));
  wait(*s);
  wait(*r);
  if (r->transport == nullptr || std::string(r->transport->name()) == "cuda_ipc") {
    failures.push_back("the host message did not come over the host route");
  }
  std::vector<unsigned char> got = dev.download(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) {
    if (got[i] != byte_at(prev, me, i + 7)) {
      failures.push_back(fmt::format("host message into device memory differs at byte {}", i));
      break;
    }
  }
}

}  // namespace

TEST_CASE("device buffers take the device route and host buffers the host route", "[cuda][mesh]") {
  auto store = make_memory_store(std::chrono::seconds(60));
  std::vector<std::vector<std::string>> failures(kWorld);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      auto& mine = failures[static_cast<std::size_t>(rank)];
      try {
        cuda::check(cudaSetDevice(0), "cudaSetDevice");
        transport::PeerInfo self{rank, rank, 0, "test-host", "localhost", static_cast<int>(getpid())};
        transport::MeshOptions opts;
        opts.timeout = std::chrono::seconds(60);
        auto mesh = transport::Mesh::create(store, self, kWorld, opts);
        rank_body(*mesh, mine);
        mesh->close();
      } catch (const std::exception& e) {
        mine.push_back(fmt::format("threw: {}", e.what()));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < kWorld; ++rank) {
    for (const auto& f : failures[static_cast<std::size_t>(rank)]) FAIL_CHECK(fmt::format("rank {}: {}", rank, f));
  }
}
