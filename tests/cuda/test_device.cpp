// Where buffers live, as CUDA reports it, and the clear error for a call that mixes host and device buffers.

#include <catch2/catch.hpp>

#include <dcomm/error.hpp>

#include <vector>

#include "runtime/cuda/device.hpp"
#include "tests/cuda/device_memory.hpp"

using namespace dcomm;

TEST_CASE("pointers are classified as host, pinned, device or managed memory", "[cuda][device]") {
  std::vector<float> pageable(64, 1.0f);
  test::DeviceMemory device(256);
  void* pinned = nullptr;
  void* managed = nullptr;
  cuda::check(cudaHostAlloc(&pinned, 256, cudaHostAllocDefault), "cudaHostAlloc");
  cuda::check(cudaMallocManaged(&managed, 256), "cudaMallocManaged");

  CHECK(runtime::describe_pointer(pageable.data()).kind == runtime::MemoryKind::kHost);
  CHECK(runtime::describe_pointer(pinned).kind == runtime::MemoryKind::kRegisteredHost);
  CHECK(runtime::describe_pointer(device.data()).kind == runtime::MemoryKind::kDevice);
  CHECK(runtime::describe_pointer(device.data()).device == 0);
  CHECK(runtime::describe_pointer(device.data() + 100).kind == runtime::MemoryKind::kDevice);
  CHECK(runtime::describe_pointer(managed).kind == runtime::MemoryKind::kManaged);

  CHECK(runtime::detect_device(device.data()) == Device::cuda(0));
  CHECK(runtime::detect_device(pageable.data()).is_host());
  CHECK(runtime::detect_device(pinned).is_host());
  CHECK(runtime::detect_device(managed).is_host());  // moved as host memory: correct over every transport

  (void)cudaFreeHost(pinned);
  (void)cudaFree(managed);
}

TEST_CASE("a call whose buffers are on different devices is rejected before any I/O", "[cuda][device]") {
  std::vector<float> host(16, 2.0f);
  test::DeviceMemory device(16 * sizeof(float));
  Buffer send(device.data(), 16, DType::kFloat32);
  send.detect_device = true;
  Buffer recv(host);
  try {
    runtime::call_device("all_reduce", {{"send", &send}, {"recv", &recv}});
    FAIL("mixed buffers were accepted");
  } catch (const InvalidUsageError& e) {
    CHECK_THAT(e.what(), Catch::Contains("all_reduce: send buffer is on cuda:0 but recv buffer is on host"));
  }
  Buffer recv_dev(device.data(), 16, DType::kFloat32, Device::cuda(0));
  CHECK(runtime::call_device("all_reduce", {{"send", &send}, {"recv", &recv_dev}}) == Device::cuda(0));
  // An empty buffer takes no part in the decision (a non-root's unused recv buffer, say).
  Buffer empty;
  CHECK(runtime::call_device("reduce", {{"send", &send}, {"recv", &empty}}) == Device::cuda(0));
}
