// The device reductions against the serial host reference: every dtype and op, counts 0..17 (every head/tail
// split of a 16-byte pack), counts spanning many packs and blocks, and dst/src offsets that break 16-byte alignment
// alike and differently. The whole destination allocation is compared, so a write past either end shows up.

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <string>
#include <vector>

#include "collectives/cuda/reduce_cuda.hpp"
#include "tests/cuda/device_memory.hpp"
#include "tests/cuda/host_reference.hpp"

using namespace dcomm;
using dcomm::test::DeviceMemory;

namespace {

// Untouched elements on both sides of every destination; 16 elements keep "offset 0" 16-byte aligned for every dtype.
constexpr std::size_t kGuard = 16;

struct Shape {
  std::size_t count, dst_offset, src_offset;
};

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  const std::size_t offsets[] = {0, 1, 3};
  for (std::size_t count = 0; count <= 17; ++count) {
    for (std::size_t d : offsets) {
      for (std::size_t s : offsets) out.push_back({count, d, s});
    }
  }
  for (std::size_t count : {std::size_t{1001}, std::size_t{300007}}) {
    out.push_back({count, 0, 0});
    out.push_back({count, 1, 1});
    out.push_back({count, 1, 0});
  }
  return out;
}

// Runs `device_op(dst, src)` on device copies and `host_op(dst_bytes, src_bytes)` on host copies of the same data;
// returns a description of the first difference, or "".
template <typename DeviceOp, typename HostOp>
std::string compare(DType dtype, const Shape& sh, DeviceOp device_op, HostOp host_op) {
  const std::size_t size = dtype_size(dtype);
  const std::size_t total = sh.count + 2 * kGuard;
  std::vector<unsigned char> dst = test::make_values(dtype, total, 1);
  std::vector<unsigned char> src = test::make_values(dtype, total, 2);
  DeviceMemory d_dst(total * size), d_src(total * size);
  d_dst.upload(dst.data(), dst.size());
  d_src.upload(src.data(), src.size());
  device_op(d_dst.data() + (kGuard + sh.dst_offset) * size, d_src.data() + (kGuard + sh.src_offset) * size);
  coll::synchronize_cuda(nullptr, Deadline::after(std::chrono::seconds(60)), "test kernel");
  host_op(dst.data() + (kGuard + sh.dst_offset) * size, src.data() + (kGuard + sh.src_offset) * size);
  std::vector<unsigned char> got = d_dst.download(dst.size());
  for (std::size_t i = 0; i < total; ++i) {
    if (std::memcmp(got.data() + i * size, dst.data() + i * size, size) != 0) {
      return fmt::format("{} count {} dst offset {} src offset {}: element {} of the allocation differs",
                         to_string(dtype), sh.count, sh.dst_offset, sh.src_offset, i);
    }
  }
  return {};
}

// dst[i] = f(dst[i], src[i]) on host bytes typed by `dtype`; f is called with two values of the storage type.
template <typename F>
void host_elementwise(DType dtype, unsigned char* dst, const unsigned char* src, std::size_t count, F f) {
  test::with_host_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (std::size_t i = 0; i < count; ++i) {
      T a, b;
      std::memcpy(&a, dst + i * sizeof(T), sizeof(T));
      std::memcpy(&b, src + i * sizeof(T), sizeof(T));
      const T r = f(a, b);
      std::memcpy(dst + i * sizeof(T), &r, sizeof(T));
    }
  });
}

}  // namespace

TEST_CASE("reduce_cuda matches the host reference for every dtype, op, count and alignment", "[cuda][reduce]") {
  std::vector<std::string> failures;
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      if (!op_fits_dtype(op, dtype)) continue;
      for (const Shape& sh : shapes()) {
        std::string f = compare(
            dtype, sh, [&](char* d, char* s) { coll::reduce_cuda(d, s, sh.count, dtype, op, nullptr); },
            [&](unsigned char* d, unsigned char* s) {
              host_elementwise(dtype, d, s, sh.count,
                               [&](auto a, auto b) { return test::reference_combine(op, a, b); });
            });
        if (!f.empty()) failures.push_back(fmt::format("{}: {}", to_string(op), f));
      }
    }
  }
  INFO(fmt::format("{} failures, first: {}", failures.size(), failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}

TEST_CASE("scale_cuda and divide_cuda match the host reference", "[cuda][reduce]") {
  std::vector<std::string> failures;
  for (DType dtype : kAllDTypes) {
    for (const Shape& sh : shapes()) {
      std::string f = compare(
          dtype, sh, [&](char* d, char* s) { coll::scale_cuda(d, s, sh.count, dtype, 0.75, nullptr); },
          [&](unsigned char* d, unsigned char* s) {
            host_elementwise(dtype, d, s, sh.count, [](auto, auto v) {
              using T = decltype(v);
              if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<double>(v) * 0.75);
              else if constexpr (std::is_same_v<T, double>) return v * 0.75;
              else return test::from_float<T>(static_cast<float>(test::to_double(v)) * 0.75f);
            });
          });
      if (!f.empty()) failures.push_back("scale: " + f);
      f = compare(
          dtype, sh, [&](char* d, char*) { coll::divide_cuda(d, sh.count, dtype, 3, nullptr); },
          [&](unsigned char* d, unsigned char*) {
            host_elementwise(dtype, d, d, sh.count, [](auto v, auto) {
              using T = decltype(v);
              if constexpr (std::is_integral_v<T>) return static_cast<T>(v / static_cast<T>(3));
              else if constexpr (std::is_same_v<T, double>) return v / 3.0;
              else return test::from_float<T>(static_cast<float>(test::to_double(v)) / 3.0f);
            });
          });
      if (!f.empty()) failures.push_back("divide: " + f);
    }
  }
  INFO(fmt::format("{} failures, first: {}", failures.size(), failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}

TEST_CASE("alloc_cuda scratch is usable on its stream and returned with free_cuda", "[cuda][reduce]") {
  std::vector<unsigned char> in(4099);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i % 241);
  DeviceMemory src(in.size()), dst(in.size());
  src.upload(in.data(), in.size());
  void* scratch = coll::alloc_cuda(in.size(), nullptr);
  coll::copy_cuda(scratch, src.data(), in.size(), nullptr);
  coll::copy_cuda(dst.data(), scratch, in.size(), nullptr);
  coll::free_cuda(scratch, nullptr);
  coll::synchronize_cuda(nullptr, Deadline::after(std::chrono::seconds(60)), "scratch round trip");
  CHECK(dst.download(in.size()) == in);
}

TEST_CASE("copy_cuda moves overlapping ranges like memmove", "[cuda][reduce]") {
  std::vector<std::string> failures;
  for (std::ptrdiff_t shift : {-7, -1, 1, 16, 333}) {
    const std::size_t bytes = 1000, room = bytes + 800;  // src at 400: every shift stays inside
    std::vector<unsigned char> host(room);
    for (std::size_t i = 0; i < room; ++i) host[i] = static_cast<unsigned char>(i * 7 % 256);
    DeviceMemory mem(room);
    mem.upload(host.data(), room);
    const std::size_t src = 400, dst = static_cast<std::size_t>(400 + shift);
    coll::copy_cuda(mem.data() + dst, mem.data() + src, bytes, nullptr);
    coll::synchronize_cuda(nullptr, Deadline::after(std::chrono::seconds(60)), "overlapping copy");
    std::memmove(host.data() + dst, host.data() + src, bytes);
    if (mem.download(room) != host) failures.push_back(fmt::format("shift {} differs from memmove", shift));
  }
  INFO(fmt::format("{} failures, first: {}", failures.size(), failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}

TEST_CASE("copy_cuda copies any byte range between device buffers", "[cuda][reduce]") {
  std::vector<std::string> failures;
  for (const Shape& sh : shapes()) {
    std::string f = compare(
        DType::kUInt8, sh, [&](char* d, char* s) { coll::copy_cuda(d, s, sh.count, nullptr); },
        [&](unsigned char* d, unsigned char* s) { std::memcpy(d, s, sh.count); });
    if (!f.empty()) failures.push_back(f);
  }
  INFO(fmt::format("{} failures, first: {}", failures.size(), failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}
