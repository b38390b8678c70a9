// The parts of the cuda_ipc transport that need no GPU: the shared-memory control rings (seen through two
// mappings, as two processes see them) and the checks made at connect and send time. Runs on any machine.

#include <catch2/catch.hpp>

#include <dcomm/error.hpp>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/cuda/file_store.hpp"
#include "transports/cuda_ipc/control_ring.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"
#include "transports/registry.hpp"

using namespace dcomm;
using namespace dcomm::transport;
using cuda_ipc::ControlRecord;

namespace {

std::string unique_name(const char* what) {
  return "/dcomm-test-" + std::string(what) + "-" + std::to_string(getpid());
}

}  // namespace

TEST_CASE("control rings carry records in order between two mappings, and refuse when full", "[cuda][ipc]") {
  const std::string name = unique_name("ring");
  auto owner = cuda_ipc::ControlSegment::create(name, 3);
  auto other = cuda_ipc::ControlSegment::open(name, 3);
  cuda_ipc::Ring& writer_view = other.ring(2);  // rank 2 writes into this segment's ring 2
  cuda_ipc::Ring& reader_view = owner.ring(2);

  ControlRecord rec;
  CHECK_FALSE(cuda_ipc::ring_pop(reader_view, &rec));
  uint64_t written = 0, read = 0;
  bool in_order = true;
  // Three rounds of fill-to-full then drain cross the slot count several times, so the indices wrap.
  for (int round = 0; round < 3; ++round) {
    while (true) {
      ControlRecord out;
      out.seq = written;
      out.tag = written * 3 + 1;
      out.bytes = written + 17;
      if (!cuda_ipc::ring_push(writer_view, out)) break;
      ++written;
    }
    CHECK(written - read == cuda_ipc::Ring::kSlots);
    while (cuda_ipc::ring_pop(reader_view, &rec)) {
      in_order = in_order && rec.seq == read && rec.tag == read * 3 + 1 && rec.bytes == read + 17;
      ++read;
    }
    CHECK(read == written);
  }
  CHECK(in_order);
  // Other writers' rings are untouched.
  CHECK_FALSE(cuda_ipc::ring_pop(owner.ring(0), &rec));
  CHECK_FALSE(cuda_ipc::ring_pop(owner.ring(1), &rec));
}

TEST_CASE("opening a control segment of another world size is a clear error", "[cuda][ipc]") {
  const std::string name = unique_name("size");
  auto owner = cuda_ipc::ControlSegment::create(name, 2);
  CHECK_THROWS_WITH(cuda_ipc::ControlSegment::open(name, 4), Catch::Contains("another world size"));
  CHECK_THROWS_AS(cuda_ipc::ControlSegment::open(name + "-missing", 2), SystemError);
}

TEST_CASE("cuda_ipc refuses peers and buffers it cannot serve", "[cuda][ipc]") {
  const auto dir = std::filesystem::temp_directory_path() / ("dcomm-cuda-ipc-unit-" + std::to_string(getpid()));
  test::FileStore store(dir, std::chrono::seconds(10));
  PeerInfo a{0, 0, 0, "host-a", "a", getpid()};
  PeerInfo b{1, 1, 0, "host-a", "a", getpid()};
  PeerInfo far{2, 0, 1, "host-b", "b", 1};
  const std::string world = "unit" + std::to_string(getpid());
  auto t0 = make_cuda_ipc_transport(TransportContext{a, 3, std::chrono::seconds(10), world});
  auto t1 = make_cuda_ipc_transport(TransportContext{b, 3, std::chrono::seconds(10), world});
  CHECK_FALSE(t0->can_connect(a, far));  // another host: never
  CHECK(t0->supports_device(Device::cuda(0)));
  CHECK_FALSE(t0->supports_device(Device::host()));
  // It sends device buffers only, but a device message may be received into host memory (cudaMemcpy reaches it):
  // the mesh refused that delivery before the first GPU run found it (device -> host, receive posted late).
  CHECK(t0->receives_into(Device::host()));
  CHECK(t0->receives_into(Device::cuda(0)));
  t0->publish(store);
  t1->publish(store);
  if (cuda::device_count() == 0) {
    CHECK_FALSE(t0->can_connect(a, b));
    CHECK_THROWS_WITH(t0->connect(store, {b}, Deadline::after(std::chrono::seconds(10))),
                      Catch::Contains("rank 1 on a sees no CUDA device"));
  } else {
    CHECK(t0->can_connect(a, b));
    t0->connect(store, {b}, Deadline::after(std::chrono::seconds(10)));
    char host[8] = {};
    CHECK_THROWS_WITH(t0->isend(1, 0, host, sizeof(host), Device::host(), std::make_shared<Op>()),
                      Catch::Contains("carries device buffers only"));
  }
  CHECK_THROWS_WITH(t0->isend(2, 0, nullptr, 0, Device::cuda(0), std::make_shared<Op>()),
                    Catch::Contains("not connected"));
  t0->close();
  t1->close();
  std::filesystem::remove_all(dir);
}
