#include "tools/bench/values.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tools/bench/args.hpp"

namespace dcomm::bench {
namespace {

// IEEE binary16 <-> float, round to nearest even. The bench only needs the normal range and zero.
uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (exp <= 0) return static_cast<uint16_t>(sign);            // underflow to signed zero
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow (and nan) to infinity
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is still correct
  return static_cast<uint16_t>(h);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) return std::ldexp(static_cast<float>(mant), -24) * (sign ? -1.f : 1.f);
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t float_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

template <typename T>
T get(const void* data, std::size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(data) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void put(void* data, std::size_t i, T v) {
  std::memcpy(static_cast<char*>(data) + i * sizeof(T), &v, sizeof(T));
}

// Integers wrap modulo 2^bits, as the dtype's own arithmetic does.
template <typename T>
T wrap(double v) {
  return static_cast<T>(static_cast<uint64_t>(static_cast<int64_t>(v)));
}

uint64_t fold(ReduceOp op, int world, std::size_t index, int iter) {
  auto acc = static_cast<uint64_t>(reduce_input(0, index, iter));
  for (int r = 1; r < world; ++r) {
    auto v = static_cast<uint64_t>(reduce_input(r, index, iter));
    switch (op) {
      case ReduceOp::kProd: acc *= v; break;
      case ReduceOp::kBAnd: acc &= v; break;
      case ReduceOp::kBOr: acc |= v; break;
      case ReduceOp::kBXor: acc ^= v; break;
      default: break;
    }
  }
  return acc;
}

}  // namespace

double reduce_input(int rank, std::size_t index, int iter) {
  return static_cast<double>(1 + (index + static_cast<std::size_t>(iter)) % 5 + static_cast<std::size_t>(rank));
}

double reduce_expected(ReduceOp op, int world, std::size_t index, int iter, DType dtype) {
  const double p = world;
  const double b = reduce_input(0, index, iter);
  const double sum = p * b + p * (p - 1) / 2;
  double want = 0;
  switch (op) {
    case ReduceOp::kSum: want = sum; break;
    case ReduceOp::kAvg: want = dtype_is_float(dtype) ? sum / p : std::trunc(sum / p); break;
    case ReduceOp::kPreMulSum: want = kPreMulScale * sum; break;
    case ReduceOp::kMin: want = b; break;
    case ReduceOp::kMax: want = b + p - 1; break;
    case ReduceOp::kProd:
      // Floats multiply in floating point; integers wrap, which the modular fold reproduces.
      if (dtype_is_float(dtype)) {
        want = 1;
        for (int r = 0; r < world; ++r) want *= reduce_input(r, index, iter);
      } else {
        want = static_cast<double>(static_cast<int64_t>(fold(op, world, index, iter)));
      }
      break;
    case ReduceOp::kBAnd:
    case ReduceOp::kBOr:
    case ReduceOp::kBXor: want = static_cast<double>(fold(op, world, index, iter)); break;
  }
  // Round-trip through the dtype: what a correct result holds.
  alignas(8) unsigned char cell[8];
  store(cell, dtype, 0, want);
  return load(cell, dtype, 0);
}

double move_input(int rank, std::size_t index, int iter) {
  return static_cast<double>(1 + (31 * static_cast<std::size_t>(rank) + 7 * index + 13 * static_cast<std::size_t>(iter)) % 101);
}

double load(const void* data, DType dtype, std::size_t i) {
  switch (dtype) {
    case DType::kInt8: return get<int8_t>(data, i);
    case DType::kUInt8: return get<uint8_t>(data, i);
    case DType::kInt32: return get<int32_t>(data, i);
    case DType::kUInt32: return get<uint32_t>(data, i);
    case DType::kInt64: return static_cast<double>(get<int64_t>(data, i));
    case DType::kUInt64: return static_cast<double>(get<uint64_t>(data, i));
    case DType::kFloat16: return half_to_float(get<uint16_t>(data, i));
    case DType::kBFloat16: return bf16_to_float(get<uint16_t>(data, i));
    case DType::kFloat32: return get<float>(data, i);
    case DType::kFloat64: return get<double>(data, i);
  }
  return 0;
}

void store(void* data, DType dtype, std::size_t i, double v) {
  switch (dtype) {
    case DType::kInt8: put(data, i, wrap<int8_t>(v)); break;
    case DType::kUInt8: put(data, i, wrap<uint8_t>(v)); break;
    case DType::kInt32: put(data, i, wrap<int32_t>(v)); break;
    case DType::kUInt32: put(data, i, wrap<uint32_t>(v)); break;
    case DType::kInt64: put(data, i, wrap<int64_t>(v)); break;
    case DType::kUInt64: put(data, i, wrap<uint64_t>(v)); break;
    case DType::kFloat16: put(data, i, float_to_half(static_cast<float>(v))); break;
    case DType::kBFloat16: put(data, i, float_to_bf16(static_cast<float>(v))); break;
    case DType::kFloat32: put(data, i, static_cast<float>(v)); break;
    case DType::kFloat64: put(data, i, v); break;
  }
}

bool matches(double got, double want, DType dtype) {
  if (!dtype_is_float(dtype)) return got == want;
  const double tol = dtype_size(dtype) == 2 ? 1e-2 : (dtype == DType::kFloat32 ? 1e-6 : 1e-12);
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

}  // namespace dcomm::bench
