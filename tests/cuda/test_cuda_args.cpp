// Caller mistakes the CUDA entry points reject before touching a GPU; these run on any machine.

#include <catch2/catch.hpp>

#include <dcomm/error.hpp>

#include <cstdint>

#include "collectives/cuda/reduce_cuda.hpp"
#include "runtime/cuda/device.hpp"
#include "runtime/cuda/stream_order.hpp"

using namespace dcomm;

TEST_CASE("device reductions reject bad arguments before any launch", "[cuda][args]") {
  alignas(16) float buf[8] = {};
  CHECK_THROWS_AS(coll::reduce_cuda(buf, buf, 8, DType::kFloat32, ReduceOp::kBXor, nullptr), InvalidUsageError);
  CHECK_THROWS_WITH(coll::reduce_cuda(buf, buf, 8, DType::kFloat32, ReduceOp::kBAnd, nullptr),
                    Catch::Contains("band does not apply to float32"));
  auto* odd = reinterpret_cast<char*>(buf) + 1;
  CHECK_THROWS_WITH(coll::reduce_cuda(odd, buf, 4, DType::kFloat32, ReduceOp::kSum, nullptr),
                    Catch::Contains("dst pointer") && Catch::Contains("not aligned to its 4-byte float32"));
  CHECK_THROWS_WITH(coll::scale_cuda(buf, odd, 4, DType::kFloat32, 2.0, nullptr), Catch::Contains("src pointer"));
  CHECK_THROWS_WITH(coll::divide_cuda(buf, 4, DType::kInt32, 0, nullptr), Catch::Contains("divisor 0"));
  // Nothing to do is not an error, even with null pointers.
  CHECK_NOTHROW(coll::reduce_cuda(nullptr, nullptr, 0, DType::kInt64, ReduceOp::kMax, nullptr));
}

TEST_CASE("a device buffer where no GPU is visible is a clear usage error", "[cuda][args]") {
  float host[4] = {1, 2, 3, 4};
  Buffer h(host, 4);
  Buffer d(host, 4, DType::kFloat32, Device::cuda(0));
  if (runtime::cuda_available()) {
    CHECK_THROWS_WITH(runtime::call_device("broadcast", {{"send", &h}, {"recv", &d}}),
                      Catch::Contains("send buffer is on host but recv buffer is on cuda:0"));
  } else {
    CHECK_THROWS_WITH(runtime::call_device("broadcast", {{"send", &d}}),
                      Catch::Contains("broadcast: send buffer is on cuda:0 but this process sees no CUDA device"));
  }
  CHECK(runtime::call_device("broadcast", {{"send", &h}, {"recv", &h}}).is_host());
}

TEST_CASE("host-only stream ordering hands out tickets and never waits", "[cuda][args]") {
  runtime::StreamOrder order(Device::host(), std::chrono::seconds(1));
  const uint64_t a = order.record_input(nullptr);
  const uint64_t b = order.record_input(nullptr);
  CHECK(b == a + 1);
  CHECK(order.input_ready(a));
  CHECK_NOTHROW(order.wait_input(b, Deadline::after(std::chrono::seconds(1)), "test"));
  order.finish(b);
  CHECK_FALSE(order.gate_timed_out());
}

TEST_CASE("host collectives get a host StreamOrder whose scope does nothing but finish", "[cuda][args]") {
  runtime::StreamOrders orders(std::chrono::seconds(1));
  runtime::StreamOrder& order = orders.get(Device::host());
  CHECK(&orders.get(Device::host()) == &order);
  CHECK(order.device().is_host());
  const uint64_t ticket = order.record_input(nullptr);
  { runtime::CollectiveScope scope(order, ticket, Deadline::after(std::chrono::seconds(1)), "host collective"); }
  CHECK(order.input_ready(ticket));
}
