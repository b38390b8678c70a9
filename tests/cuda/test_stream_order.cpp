// Stream ordering: a collective sees the work its caller queued before the call (through an event, host never
// blocked), and work the caller queues after Work::wait_stream waits, on the device, until the collective finishes.

#include <catch2/catch.hpp>

#include <dcomm/error.hpp>

#include <chrono>
#include <thread>
#include <vector>

#include "collectives/cuda/reduce_cuda.hpp"
#include "runtime/cuda/stream_order.hpp"
#include "tests/cuda/device_memory.hpp"
#include "tests/cuda/test_kernels.hpp"

using namespace dcomm;
using dcomm::test::DeviceMemory;

namespace {

constexpr std::size_t kCount = 1000;
constexpr uint64_t kDelayNs = 1'000'000'000;  // 1 s of device time: the fill is still running when we look

class Stream {
 public:
  explicit Stream(unsigned flags = cudaStreamDefault) {
    cuda::check(cudaStreamCreateWithFlags(&s_, flags), "test cudaStreamCreate");
  }
  ~Stream() { (void)cudaStreamDestroy(s_); }
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// Reads device memory on a stream of its own, so the read never waits for the caller's (possibly gated) stream.
std::vector<int32_t> peek(const DeviceMemory& mem, std::size_t n) {
  Stream s(cudaStreamNonBlocking);
  std::vector<int32_t> out(n);
  cuda::check(cudaMemcpyAsync(out.data(), mem.data(), n * sizeof(int32_t), cudaMemcpyDeviceToHost, s.get()), "peek");
  cuda::wait_stream(s.get(), Deadline::after(std::chrono::seconds(30)), "peek");
  return out;
}

bool all_equal(const std::vector<int32_t>& v, int32_t x) {
  for (int32_t e : v) {
    if (e != x) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("a collective sees the work queued on the caller's stream before the call", "[cuda][stream]") {
  Stream user;
  DeviceMemory data(kCount * sizeof(int32_t)), ones(kCount * sizeof(int32_t));
  std::vector<int32_t> host_ones(kCount, 1);
  ones.upload(host_ones.data(), ones.bytes());
  test::queue_delayed_fill(user.get(), reinterpret_cast<int32_t*>(data.data()), kCount, 7, kDelayNs);

  runtime::StreamOrder order(Device::cuda(0), std::chrono::seconds(60));
  const uint64_t ticket = order.record_input(user.get());
  // Device side: a reduction on the group's stream runs after the fill without the host waiting for it.
  {
    coll::StreamScope scope(order.stream());
    coll::reduce_cuda(data.data(), ones.data(), kCount, DType::kInt32, ReduceOp::kSum, nullptr);
  }
  // Host side: the worker's bounded wait returns once the fill is done.
  order.wait_input(ticket, Deadline::after(std::chrono::seconds(60)), "test collective");
  coll::synchronize_cuda(order.stream(), Deadline::after(std::chrono::seconds(60)), "test reduction");
  CHECK(all_equal(peek(data, kCount), 8));
  order.finish(ticket);
}

TEST_CASE("work queued after wait_stream waits on the device until the collective finishes", "[cuda][stream]") {
  Stream user;
  DeviceMemory flag(kCount * sizeof(int32_t));
  cuda::check(cudaMemset(flag.data(), 0, flag.bytes()), "memset");
  runtime::StreamOrder order(Device::cuda(0), std::chrono::seconds(60));
  const uint64_t ticket = order.record_input(user.get());
  order.wait_input(ticket, Deadline::after(std::chrono::seconds(60)), "test collective");

  order.complete_on(ticket, user.get());
  test::queue_delayed_fill(user.get(), reinterpret_cast<int32_t*>(flag.data()), kCount, 1, 0);
  // The host is free (we got here) but the stream is held: the fill has not run. Waiting longer only makes a
  // broken gate more visible, never a working one fail.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(all_equal(peek(flag, kCount), 0));

  order.finish(ticket);
  cuda::wait_stream(user.get(), Deadline::after(std::chrono::seconds(60)), "user stream after finish");
  CHECK(all_equal(peek(flag, kCount), 1));
  CHECK_FALSE(order.gate_timed_out());

  // A ticket already finished gates nothing.
  order.complete_on(ticket, user.get());
  cuda::wait_stream(user.get(), Deadline::after(std::chrono::seconds(60)), "user stream, finished ticket");
}

TEST_CASE("a gate whose collective never finishes gives up after its timeout", "[cuda][stream]") {
  Stream user;
  runtime::StreamOrder order(Device::cuda(0), std::chrono::milliseconds(300));
  const uint64_t ticket = order.record_input(user.get());
  order.complete_on(ticket, user.get());
  cuda::wait_stream(user.get(), Deadline::after(std::chrono::seconds(60)), "user stream behind a stuck gate");
  CHECK(order.gate_timed_out());
}

TEST_CASE("finishing a later ticket releases gates on earlier ones", "[cuda][stream]") {
  Stream user;
  runtime::StreamOrder order(Device::cuda(0), std::chrono::seconds(60));
  const uint64_t first = order.record_input(user.get());
  const uint64_t second = order.record_input(user.get());
  CHECK(second > first);
  order.complete_on(first, user.get());
  order.finish(second);
  cuda::wait_stream(user.get(), Deadline::after(std::chrono::seconds(60)), "user stream");
  CHECK_FALSE(order.gate_timed_out());
}

TEST_CASE("a CollectiveScope waits for the input, sends kernels to the group's stream, finishes", "[cuda][stream]") {
  Stream user;
  DeviceMemory data(kCount * sizeof(int32_t)), ones(kCount * sizeof(int32_t));
  std::vector<int32_t> host_ones(kCount, 1);
  ones.upload(host_ones.data(), ones.bytes());
  test::queue_delayed_fill(user.get(), reinterpret_cast<int32_t*>(data.data()), kCount, 7, kDelayNs / 4);
  runtime::StreamOrders orders(std::chrono::seconds(60));
  runtime::StreamOrder& order = orders.get(Device::cuda(0));
  CHECK(&orders.get(Device::cuda(0)) == &order);
  const uint64_t ticket = order.record_input(user.get());
  order.complete_on(ticket, user.get());
  {
    runtime::CollectiveScope scope(order, ticket, Deadline::after(std::chrono::seconds(60)), "test collective");
    CHECK(coll::current_stream() == order.stream());
    CHECK(all_equal(peek(data, kCount), 7));  // the input is complete once the scope exists
    coll::reduce_cuda(data.data(), ones.data(), kCount, DType::kInt32, ReduceOp::kSum, nullptr);
    coll::synchronize_cuda(nullptr, Deadline::after(std::chrono::seconds(60)), "test reduction");
  }
  CHECK(coll::current_stream() != order.stream());
  // The scope finished the ticket, so the gate queued on the caller's stream lets it run on.
  cuda::wait_stream(user.get(), Deadline::after(std::chrono::seconds(60)), "user stream after the scope");
  CHECK(all_equal(peek(data, kCount), 8));
  CHECK_FALSE(order.gate_timed_out());
}
