#pragma once
// A serial host reference for the device reductions, written independently of the kernels: integer sum and product
// wrap through uint64_t, 16-bit floats go through float32 with cuda_fp16/cuda_bf16's host conversions, min and max
// pick like std::min/std::max. Values come from value_at(), distinct per (buffer, index).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include <dcomm/types.hpp>

namespace dcomm::test {

template <typename Fn>
void with_host_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kInt8: return fn(int8_t{});
    case DType::kUInt8: return fn(uint8_t{});
    case DType::kInt32: return fn(int32_t{});
    case DType::kUInt32: return fn(uint32_t{});
    case DType::kInt64: return fn(int64_t{});
    case DType::kUInt64: return fn(uint64_t{});
    case DType::kFloat16: return fn(__half{});
    case DType::kBFloat16: return fn(__nv_bfloat16{});
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
  }
}

template <typename T> constexpr bool kIs16BitFloat = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

template <typename T> double to_double(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return static_cast<double>(v);
}

template <typename T> T from_float(float v) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(v);
  else return static_cast<T>(v);
}

/// A result computed in float32 (float64 for double) rounded back to T once.
template <typename T, typename A> T round_to(A v) {
  if constexpr (std::is_same_v<T, double>) return v;
  else return from_float<T>(static_cast<float>(v));
}

/// Element `i` of buffer `which`: small, exactly representable in every dtype, and different per buffer and index.
template <typename T> T value_at(std::size_t i, int which) {
  const long v = static_cast<long>((i * 37 + static_cast<std::size_t>(which) * 101) % 97) - 48;
  if constexpr (kIs16BitFloat<T> || std::is_floating_point_v<T>) return from_float<T>(static_cast<float>(v) * 0.25f);
  else return static_cast<T>(v * 3 + which);
}

template <typename T> T reference_combine(ReduceOp op, T d, T s) {
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case ReduceOp::kProd: return static_cast<T>(static_cast<uint64_t>(d) * static_cast<uint64_t>(s));
      case ReduceOp::kMin: return s < d ? s : d;
      case ReduceOp::kMax: return d < s ? s : d;
      case ReduceOp::kBAnd: return static_cast<T>(d & s);
      case ReduceOp::kBOr: return static_cast<T>(d | s);
      case ReduceOp::kBXor: return static_cast<T>(d ^ s);
      default: return static_cast<T>(static_cast<uint64_t>(d) + static_cast<uint64_t>(s));
    }
  } else {
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const A a = static_cast<A>(to_double(d)), b = static_cast<A>(to_double(s));
    switch (op) {
      case ReduceOp::kProd: return round_to<T>(a * b);
      case ReduceOp::kMin: return b < a ? s : d;
      case ReduceOp::kMax: return a < b ? s : d;
      default: return round_to<T>(a + b);
    }
  }
}

/// Fills `count` elements of `dtype` for buffer `which` into raw bytes.
inline std::vector<unsigned char> make_values(DType dtype, std::size_t count, int which) {
  std::vector<unsigned char> out(count * dtype_size(dtype));
  with_host_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (std::size_t i = 0; i < count; ++i) {
      T v = value_at<T>(i, which);
      std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
    }
  });
  return out;
}

}  // namespace dcomm::test
