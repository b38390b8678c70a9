// dcomm-cuda-bench: the device reduction kernel's throughput beside device-to-device cudaMemcpy bandwidth, in the
// same run, so the kernel can be judged against what the memory system gives a plain copy. A reduction of n bytes
// reads 2n and writes n; a copy reads n and writes n. Both columns report bytes of memory traffic per second, and
// "reduce/copy" their ratio (1.0: the kernel streams as fast as the copy engine path).
// `--latency` instead times, as the host sees them, the device steps a collective on device buffers waits for: a
// kernel launch then polling its stream, an 8-byte and a 1 MiB device copy then polling their event, exporting an
// allocation for IPC. Run two at once on one GPU to see what another process's context costs each step.
// Exits 77 without a CUDA device, so its smoke test skips on CPU-only machines.

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "collectives/cuda/reduce_cuda.hpp"
#include "tests/cuda/device_memory.hpp"

using namespace dcomm;

namespace {

class Timer {
 public:
  Timer() {
    cuda::check(cudaEventCreate(&start_), "cudaEventCreate");
    cuda::check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~Timer() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
  }
  // Mean seconds per call of `work` over `iters` calls queued back to back on `stream`.
  template <typename Work>
  double time(cudaStream_t stream, int iters, Work work) {
    work();  // warm-up: first launches pay for module loading
    cuda::check(cudaEventRecord(start_, stream), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) work();
    cuda::check(cudaEventRecord(stop_, stream), "cudaEventRecord");
    cuda::wait_event(stop_, Deadline::after(std::chrono::seconds(120)), "benchmark");
    float ms = 0;
    cuda::check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return static_cast<double>(ms) / 1e3 / iters;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// Host-observed microseconds of `step` (which queues work and waits for it): median, 90th percentile, max.
template <typename Step>
void latency_row(const char* name, int iters, Step step) {
  step();
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  fmt::print("{:<44} {:>10.1f} {:>10.1f} {:>10.1f}\n", name, us[us.size() / 2], us[us.size() * 9 / 10], us.back());
}

int latency(int iters) {
  cudaStream_t stream = nullptr;
  cuda::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t event = nullptr;
  cuda::check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  const std::size_t big = 1u << 20;
  test::DeviceMemory a(big), b(big);
  cuda::check(cudaMemset(a.data(), 0, big), "memset");
  cuda::check(cudaMemset(b.data(), 0, big), "memset");
  const auto wait = [&](const char* what) {
    cuda::wait_event(event, Deadline::after(std::chrono::seconds(10)), what);
  };
  fmt::print("{:<44} {:>10} {:>10} {:>10}\n", "host-observed step (us)", "p50", "p90", "max");
  latency_row("reduce kernel, 2 floats + poll stream", iters, [&] {
    coll::reduce_cuda(a.data(), b.data(), 2, DType::kFloat32, ReduceOp::kSum, stream);
    coll::synchronize_cuda(stream, Deadline::after(std::chrono::seconds(10)), "latency");
  });
  latency_row("copy 8 B + event + poll", iters, [&] {
    cuda::check(cudaMemcpyAsync(a.data(), b.data(), 8, cudaMemcpyDeviceToDevice, stream), "copy");
    cuda::check(cudaEventRecord(event, stream), "record");
    wait("copy 8 B");
  });
  latency_row("copy 1 MiB + event + poll", iters, [&] {
    cuda::check(cudaMemcpyAsync(a.data(), b.data(), big, cudaMemcpyDeviceToDevice, stream), "copy");
    cuda::check(cudaEventRecord(event, stream), "record");
    wait("copy 1 MiB");
  });
  latency_row("reduce kernel 1 MiB + poll stream", iters, [&] {
    coll::reduce_cuda(a.data(), b.data(), big / 4, DType::kFloat32, ReduceOp::kSum, stream);
    coll::synchronize_cuda(stream, Deadline::after(std::chrono::seconds(10)), "latency");
  });
  latency_row("cudaIpcGetMemHandle", iters, [&] {
    cudaIpcMemHandle_t h;
    cuda::check(cudaIpcGetMemHandle(&h, a.data()), "cudaIpcGetMemHandle");
  });
  latency_row("cudaStreamQuery (idle stream)", iters, [&] { (void)cudaStreamQuery(stream); });
  (void)cudaEventDestroy(event);
  (void)cudaStreamDestroy(stream);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Device reduction throughput vs device-to-device copy bandwidth"};
  std::size_t min_bytes = 1 << 10, max_bytes = 256u << 20;
  int iters = 20;
  std::string dtype_name = "float32", op_name = "sum";
  app.add_option("--min-bytes", min_bytes, "smallest buffer");
  app.add_option("--max-bytes", max_bytes, "largest buffer (sizes grow 4x)");
  app.add_option("--iters", iters, "timed calls per size")->check(CLI::PositiveNumber);
  app.add_option("--dtype", dtype_name, "element type");
  app.add_option("--op", op_name, "reduction");
  bool latency_only = false;
  app.add_flag("--latency", latency_only, "time the host-observed latency of single device steps instead");
  CLI11_PARSE(app, argc, argv);
  DType dtype{};
  ReduceOp op{};
  if (!parse_dtype(dtype_name, &dtype) || !parse_reduce_op(op_name, &op) || !op_fits_dtype(op, dtype)) {
    std::fprintf(stderr, "unknown or unfit dtype/op: %s %s\n", dtype_name.c_str(), op_name.c_str());
    return 2;
  }
  if (cuda::device_count() == 0) {
    std::puts("no CUDA device: skipping");
    return 77;
  }
  if (latency_only) return latency(iters);
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  cudaStream_t stream = nullptr;
  cuda::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  fmt::print("device 0: {}; {} {}, {} timed calls per size\n", prop.name, dtype_name, op_name, iters);
  fmt::print("{:>12} {:>12} {:>14} {:>12} {:>14} {:>12}\n", "bytes", "reduce us", "reduce GB/s", "copy us",
             "copy GB/s", "reduce/copy");
  Timer timer;
  const std::size_t elem = dtype_size(dtype);
  for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const std::size_t count = bytes / elem;
    test::DeviceMemory a(bytes), b(bytes);
    cuda::check(cudaMemsetAsync(a.data(), 0, bytes, stream), "memset");
    cuda::check(cudaMemsetAsync(b.data(), 0, bytes, stream), "memset");
    const double t_reduce = timer.time(stream, iters, [&] {
      coll::reduce_cuda(a.data(), b.data(), count, dtype, op, stream);
    });
    const double t_copy = timer.time(stream, iters, [&] { coll::copy_cuda(a.data(), b.data(), bytes, stream); });
    const double reduce_bw = 3.0 * static_cast<double>(count * elem) / t_reduce / 1e9;
    const double copy_bw = 2.0 * static_cast<double>(bytes) / t_copy / 1e9;
    fmt::print("{:>12} {:>12.1f} {:>14.1f} {:>12.1f} {:>14.1f} {:>12.2f}\n", bytes, t_reduce * 1e6, reduce_bw,
               t_copy * 1e6, copy_bw, reduce_bw / copy_bw);
  }
  (void)cudaStreamDestroy(stream);
  return 0;
}
