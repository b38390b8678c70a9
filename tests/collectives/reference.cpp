#include "tests/collectives/reference.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "collectives/half.hpp"

namespace dcomm::test {

namespace {

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

template <typename T>
void store(Bytes& b, std::size_t i, T v) {
  std::memcpy(b.data() + i * sizeof(T), &v, sizeof(T));
}

template <typename T>
T load(const void* p, std::size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}

double epsilon(DType t) {
  switch (t) {
    case DType::kFloat16:
      return std::ldexp(1.0, -10);
    case DType::kBFloat16:
      return std::ldexp(1.0, -7);
    case DType::kFloat32:
      return std::ldexp(1.0, -23);
    default:
      return std::ldexp(1.0, -52);
  }
}

// The exact integer reference, with the runtime's wrap-around and truncation.
template <typename T>
T int_reduce(const Reduction& red, const std::vector<Bytes>& in, std::size_t idx) {
  using U = std::make_unsigned_t<T>;
  auto pre = [&](T x) {
    return red.op == ReduceOp::kPreMulSum ? static_cast<T>(static_cast<double>(x) * red.scale) : x;
  };
  T acc = pre(load<T>(in[0].data(), idx));
  for (std::size_t q = 1; q < in.size(); ++q) {
    T x = pre(load<T>(in[q].data(), idx));
    switch (red.op) {
      case ReduceOp::kProd:
        acc = static_cast<T>(static_cast<U>(static_cast<U>(acc) * static_cast<U>(x)));
        break;
      case ReduceOp::kMin:
        acc = x < acc ? x : acc;
        break;
      case ReduceOp::kMax:
        acc = acc < x ? x : acc;
        break;
      case ReduceOp::kBAnd:
        acc = static_cast<T>(acc & x);
        break;
      case ReduceOp::kBOr:
        acc = static_cast<T>(acc | x);
        break;
      case ReduceOp::kBXor:
        acc = static_cast<T>(acc ^ x);
        break;
      default:
        acc = static_cast<T>(static_cast<U>(static_cast<U>(acc) + static_cast<U>(x)));
        break;
    }
  }
  if (red.op == ReduceOp::kAvg) {
    auto p = static_cast<int64_t>(in.size());
    acc = std::is_signed_v<T> ? static_cast<T>(static_cast<int64_t>(acc) / p)
                              : static_cast<T>(static_cast<uint64_t>(acc) / static_cast<uint64_t>(p));
  }
  return acc;
}

template <typename T>
std::string check_int(const void* got, std::size_t count, const Reduction& red, const std::vector<Bytes>& in,
                      std::size_t offset) {
  for (std::size_t i = 0; i < count; ++i) {
    T want = int_reduce<T>(red, in, offset + i);
    T have = load<T>(got, i);
    if (want != have) {
      return fmt::format("element {}: got {} want {}", i, static_cast<int64_t>(have), static_cast<int64_t>(want));
    }
  }
  return "";
}

std::string check_float(const void* got, std::size_t count, DType t, const Reduction& red, const std::vector<Bytes>& in,
                        std::size_t offset) {
  const double p = static_cast<double>(in.size());
  for (std::size_t i = 0; i < count; ++i) {
    double acc = 0, mag = 0;
    for (std::size_t q = 0; q < in.size(); ++q) {
      double x = element(in[q].data(), offset + i, t);
      if (red.op == ReduceOp::kPreMulSum) x *= red.scale;
      if (q == 0) {
        acc = x;
      } else if (red.op == ReduceOp::kProd) {
        acc *= x;
      } else if (red.op == ReduceOp::kMin) {
        acc = std::min(acc, x);
      } else if (red.op == ReduceOp::kMax) {
        acc = std::max(acc, x);
      } else {
        acc += x;
      }
      mag += std::fabs(x);
    }
    if (red.op == ReduceOp::kAvg) acc /= p, mag /= p;
    if (red.op == ReduceOp::kProd) mag = std::fabs(acc) * p;
    // Each of at most P roundings (plus the pre-scale and the division) loses up to one epsilon of the magnitude.
    double tol = (red.op == ReduceOp::kMin || red.op == ReduceOp::kMax) ? 0.0 : (p + 2.0) * epsilon(t) * mag;
    double have = element(got, i, t);
    if (!(std::fabs(have - acc) <= tol)) {
      return fmt::format("element {}: got {} want {} (tolerance {})", i, have, acc, tol);
    }
  }
  return "";
}

}  // namespace

double element(const void* data, std::size_t i, DType t) {
  switch (t) {
    case DType::kInt8:
      return load<int8_t>(data, i);
    case DType::kUInt8:
      return load<uint8_t>(data, i);
    case DType::kInt32:
      return load<int32_t>(data, i);
    case DType::kUInt32:
      return load<uint32_t>(data, i);
    case DType::kInt64:
      return static_cast<double>(load<int64_t>(data, i));
    case DType::kUInt64:
      return static_cast<double>(load<uint64_t>(data, i));
    case DType::kFloat16:
      return coll::half_to_float(load<uint16_t>(data, i));
    case DType::kBFloat16:
      return coll::bf16_to_float(load<uint16_t>(data, i));
    case DType::kFloat32:
      return load<float>(data, i);
    case DType::kFloat64:
      return load<double>(data, i);
  }
  return 0;
}

Bytes make_input(DType t, ReduceOp op, int rank, std::size_t count, uint64_t salt) {
  Bytes b(count * dtype_size(t));
  for (std::size_t i = 0; i < count; ++i) {
    uint64_t h = mix((static_cast<uint64_t>(rank) << 40) ^ (i << 8) ^ salt ^ (static_cast<uint64_t>(t) << 56));
    auto k = static_cast<int64_t>(h % 2001) - 1000;  // -1000 .. 1000, zero rare
    if (k == 0) k = 1 + rank;
    double f = op == ReduceOp::kProd ? 1.0 + static_cast<double>(k % 97) / 512.0 : static_cast<double>(k) / 64.0;
    switch (t) {
      case DType::kInt8:
        store<int8_t>(b, i, static_cast<int8_t>(k % 100));
        break;
      case DType::kUInt8:
        store<uint8_t>(b, i, static_cast<uint8_t>(h % 200 + 1));
        break;
      case DType::kInt32:
        store<int32_t>(b, i, static_cast<int32_t>(k * 1000 + rank));
        break;
      case DType::kUInt32:
        store<uint32_t>(b, i, static_cast<uint32_t>(h));
        break;
      case DType::kInt64:
        store<int64_t>(b, i, static_cast<int64_t>(h >> 4) * (k < 0 ? -1 : 1));
        break;
      case DType::kUInt64:
        store<uint64_t>(b, i, h);
        break;
      case DType::kFloat16:
        store<uint16_t>(b, i, coll::float_to_half(static_cast<float>(f)));
        break;
      case DType::kBFloat16:
        store<uint16_t>(b, i, coll::float_to_bf16(static_cast<float>(f)));
        break;
      case DType::kFloat32:
        store<float>(b, i, static_cast<float>(f));
        break;
      case DType::kFloat64:
        store<double>(b, i, f);
        break;
    }
  }
  return b;
}

std::string check_reduction(const void* got, std::size_t count, DType t, const Reduction& red,
                            const std::vector<Bytes>& inputs, std::size_t offset) {
  switch (t) {
    case DType::kInt8:
      return check_int<int8_t>(got, count, red, inputs, offset);
    case DType::kUInt8:
      return check_int<uint8_t>(got, count, red, inputs, offset);
    case DType::kInt32:
      return check_int<int32_t>(got, count, red, inputs, offset);
    case DType::kUInt32:
      return check_int<uint32_t>(got, count, red, inputs, offset);
    case DType::kInt64:
      return check_int<int64_t>(got, count, red, inputs, offset);
    case DType::kUInt64:
      return check_int<uint64_t>(got, count, red, inputs, offset);
    default:
      return check_float(got, count, t, red, inputs, offset);
  }
}

std::string check_copy(const void* got, const Bytes& src, std::size_t offset, std::size_t count, DType t,
                       const std::string& what) {
  std::size_t es = dtype_size(t);
  if (count == 0) return "";
  if (std::memcmp(got, src.data() + offset * es, count * es) != 0) {
    for (std::size_t i = 0; i < count; ++i) {
      if (std::memcmp(static_cast<const char*>(got) + i * es, src.data() + (offset + i) * es, es) != 0) {
        return fmt::format("{}: element {} differs: got {} want {}", what, i, element(got, i, t),
                           element(src.data(), offset + i, t));
      }
    }
  }
  return "";
}

}  // namespace dcomm::test
