// The host reductions and the 16-bit float conversions, without any transport.

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <dcomm/error.hpp>

#include "collectives/device_support.hpp"
#include "collectives/half.hpp"
#include "collectives/reduce.hpp"
#include "tests/collectives/reference.hpp"

using namespace dcomm;
using namespace dcomm::coll;

namespace {

// Every non-NaN 16-bit pattern must survive widening and narrowing unchanged.
template <typename Widen, typename Narrow>
void check_round_trip(Widen widen, Narrow narrow, const char* name) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    auto h = static_cast<uint16_t>(b);
    float f = widen(h);
    if (!std::isnan(f) && narrow(f) != h) FAIL(name << " round trip of 0x" << std::hex << b);
  }
}

}  // namespace

TEST_CASE("float16 conversion rounds to nearest even and keeps specials", "[collectives][reduce]") {
  CHECK(float_to_half(1.0f) == 0x3C00);
  CHECK(float_to_half(-2.0f) == 0xC000);
  CHECK(float_to_half(65504.0f) == 0x7BFF);
  CHECK(float_to_half(65519.0f) == 0x7BFF);
  CHECK(float_to_half(65520.0f) == 0x7C00);                      // halfway to the next binade: ties to even = infinity
  CHECK(float_to_half(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);  // tie, even stays
  CHECK(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);  // tie, odd rounds up
  CHECK(float_to_half(std::ldexp(1.0f, -24)) == 0x0001);             // smallest subnormal
  CHECK(float_to_half(std::ldexp(1.0f, -25)) == 0x0000);             // tie to even: zero
  CHECK(float_to_half(3 * std::ldexp(1.0f, -25)) == 0x0002);         // tie to even: 2
  CHECK(float_to_half(std::ldexp(1.0f, -14) * 0.99999f) == 0x0400);  // rounds up into the normals
  CHECK(float_to_half(INFINITY) == 0x7C00);
  CHECK(float_to_half(-INFINITY) == 0xFC00);
  CHECK(std::isnan(half_to_float(float_to_half(NAN))));
  CHECK(float_to_half(-0.0f) == 0x8000);
  check_round_trip(half_to_float, float_to_half, "float16");
}

TEST_CASE("bfloat16 conversion rounds to nearest even", "[collectives][reduce]") {
  CHECK(float_to_bf16(1.0f) == 0x3F80);
  CHECK(float_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);      // tie, even stays
  CHECK(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);  // tie, odd rounds up
  CHECK(float_to_bf16(1.0f + std::ldexp(1.0f, -9) * 3) == 0x3F81);
  CHECK(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  check_round_trip(bf16_to_float, float_to_bf16, "bfloat16");
}

TEST_CASE("reduce_into matches the reference for every dtype and op", "[collectives][reduce]") {
  const ReduceOp ops[] = {ReduceOp::kSum,  ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kBAnd, ReduceOp::kBOr,  ReduceOp::kBXor};
  for (DType t : kAllDTypes) {
    for (ReduceOp op : ops) {
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1031}}) {
        test::Bytes a = test::make_input(t, op, 0, n, 11);
        test::Bytes b = test::make_input(t, op, 1, n, 11);
        test::Bytes dst = a;
        if (!op_fits_dtype(op, t)) {
          CHECK_THROWS_AS(reduce_into(dst.data(), b.data(), n == 0 ? 1 : n, t, op, Device::host()), InvalidUsageError);
          continue;
        }
        reduce_into(dst.data(), b.data(), n, t, op, Device::host());
        INFO(to_string(t) << " " << to_string(op) << " count " << n);
        CHECK(test::check_reduction(dst.data(), n, t, op, {a, b}, 0) == "");
      }
    }
  }
}

TEST_CASE("scale_into, divide_by and copy_bytes", "[collectives][reduce]") {
  std::vector<float> f = {1.0f, -3.0f, 0.5f};
  std::vector<float> g(3);
  scale_into(g.data(), f.data(), 3, DType::kFloat32, 0.5, Device::host());
  CHECK(g == std::vector<float>{0.5f, -1.5f, 0.25f});
  scale_into(f.data(), f.data(), 3, DType::kFloat32, 2.0, Device::host());  // in place
  CHECK(f == std::vector<float>{2.0f, -6.0f, 1.0f});

  std::vector<int32_t> i = {7, -7, 8, 0};
  divide_by(i.data(), i.size(), DType::kInt32, 2, Device::host());
  CHECK(i == std::vector<int32_t>{3, -3, 4, 0});  // truncation toward zero
  std::vector<uint8_t> u = {255, 9};
  divide_by(u.data(), u.size(), DType::kUInt8, 4, Device::host());
  CHECK(u == std::vector<uint8_t>{63, 2});
  std::vector<uint16_t> h = {float_to_half(3.0f), float_to_half(-1.0f)};
  divide_by(h.data(), h.size(), DType::kFloat16, 2, Device::host());
  CHECK(half_to_float(h[0]) == 1.5f);
  CHECK(half_to_float(h[1]) == -0.5f);
  std::vector<int64_t> big = {1000, -3};
  scale_into(big.data(), big.data(), 2, DType::kInt64, 0.5, Device::host());
  CHECK(big == std::vector<int64_t>{500, -1});

  std::vector<char> m = {'a', 'b', 'c', 'd', 'e'};
  copy_bytes(m.data() + 1, m.data(), 3, Device::host());  // overlapping: a memmove
  CHECK(std::string(m.begin(), m.end()) == "aabce");
}

TEST_CASE("device buffers without the CUDA reductions are refused clearly", "[collectives][reduce]") {
  if (device_supported(Device::cuda(0))) return;  // a build with the CUDA reductions handles them
  float x = 1, y = 2;
  try {
    reduce_into(&x, &y, 1, DType::kFloat32, ReduceOp::kSum, Device::cuda(0));
    FAIL("no error");
  } catch (const InvalidUsageError& e) {
    CHECK_THAT(e.what(), Catch::Contains("cuda:0") && Catch::Contains("CUDA"));
  }
}
