// Host implementations of the element-wise memory operations, and the dispatch to the CUDA versions for
// device memory. The inner loops run over __restrict pointers with the op inlined, so -O2/-O3 vectorizes them
// for every integer type and float32/float64; 16-bit floats go through float32 in blocks.

#include <fmt/format.h>

#include <cstring>
#include <dcomm/error.hpp>
#include <string>
#include <type_traits>

#include "collectives/device_support.hpp"
#include "collectives/half.hpp"
#include "collectives/reduce.hpp"

#if DCOMM_CUDA_REDUCE
#include <chrono>

#include "collectives/cuda/reduce_cuda.hpp"
#endif

namespace dcomm::coll {
namespace {

// Signed integers add and multiply through their unsigned type: wrap-around instead of undefined behaviour.
template <typename T, bool = std::is_integral_v<T>>
struct WideOf {
  using type = T;
};
template <typename T>
struct WideOf<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using Wide = typename WideOf<T>::type;

struct Sum {
  template <typename T>
  static T apply(T a, T b) {
    return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b));
  }
};
struct Prod {
  template <typename T>
  static T apply(T a, T b) {
    return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
  }
};
struct Min {
  template <typename T>
  static T apply(T a, T b) {
    return b < a ? b : a;
  }
};
struct Max {
  template <typename T>
  static T apply(T a, T b) {
    return a < b ? b : a;
  }
};
struct BAnd {
  template <typename T>
  static T apply(T a, T b) {
    return static_cast<T>(a & b);
  }
};
struct BOr {
  template <typename T>
  static T apply(T a, T b) {
    return static_cast<T>(a | b);
  }
};
struct BXor {
  template <typename T>
  static T apply(T a, T b) {
    return static_cast<T>(a ^ b);
  }
};

template <typename Op, typename T>
void combine(T* __restrict dst, const T* __restrict src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = Op::apply(dst[i], src[i]);
}

// 16-bit floats: widen a block to float32, combine there (a vectorizable loop), narrow once.
struct HalfCodec {
  static float to(uint16_t v) { return half_to_float(v); }
  static uint16_t from(float v) { return float_to_half(v); }
};
struct BF16Codec {
  static float to(uint16_t v) { return bf16_to_float(v); }
  static uint16_t from(float v) { return float_to_bf16(v); }
};
constexpr std::size_t kBlock = 256;

template <typename Codec, typename Op>
void combine16(uint16_t* dst, const uint16_t* src, std::size_t n) {
  float a[kBlock], b[kBlock];
  for (std::size_t base = 0; base < n; base += kBlock) {
    std::size_t m = n - base < kBlock ? n - base : kBlock;
    for (std::size_t i = 0; i < m; ++i) a[i] = Codec::to(dst[base + i]);
    for (std::size_t i = 0; i < m; ++i) b[i] = Codec::to(src[base + i]);
    combine<Op>(a, b, m);
    for (std::size_t i = 0; i < m; ++i) dst[base + i] = Codec::from(a[i]);
  }
}

template <typename Op>
bool dispatch_dtype(void* dst, const void* src, std::size_t n, DType t) {
  switch (t) {
    case DType::kInt8:
      combine<Op>(static_cast<int8_t*>(dst), static_cast<const int8_t*>(src), n);
      return true;
    case DType::kUInt8:
      combine<Op>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n);
      return true;
    case DType::kInt32:
      combine<Op>(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), n);
      return true;
    case DType::kUInt32:
      combine<Op>(static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), n);
      return true;
    case DType::kInt64:
      combine<Op>(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), n);
      return true;
    case DType::kUInt64:
      combine<Op>(static_cast<uint64_t*>(dst), static_cast<const uint64_t*>(src), n);
      return true;
    default:
      break;
  }
  if constexpr (std::is_same_v<Op, BAnd> || std::is_same_v<Op, BOr> || std::is_same_v<Op, BXor>) {
    return false;  // bitwise ops have no float meaning
  } else {
    switch (t) {
      case DType::kFloat16:
        combine16<HalfCodec, Op>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), n);
        return true;
      case DType::kBFloat16:
        combine16<BF16Codec, Op>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), n);
        return true;
      case DType::kFloat32:
        combine<Op>(static_cast<float*>(dst), static_cast<const float*>(src), n);
        return true;
      case DType::kFloat64:
        combine<Op>(static_cast<double*>(dst), static_cast<const double*>(src), n);
        return true;
      default:
        return false;
    }
  }
}

// y = f(x) element-wise for every dtype, computing in T (integers, float32, float64) or float32 (16-bit floats).
template <typename F>
void map_dtype(void* dst, const void* src, std::size_t n, DType t, F f) {
  auto run = [&](auto* d, const auto* s) {
    for (std::size_t i = 0; i < n; ++i) d[i] = f(s[i]);
  };
  auto run16 = [&](uint16_t* d, const uint16_t* s, auto codec) {
    for (std::size_t i = 0; i < n; ++i) d[i] = decltype(codec)::from(f(decltype(codec)::to(s[i])));
  };
  switch (t) {
    case DType::kInt8:
      run(static_cast<int8_t*>(dst), static_cast<const int8_t*>(src));
      break;
    case DType::kUInt8:
      run(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src));
      break;
    case DType::kInt32:
      run(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src));
      break;
    case DType::kUInt32:
      run(static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src));
      break;
    case DType::kInt64:
      run(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src));
      break;
    case DType::kUInt64:
      run(static_cast<uint64_t*>(dst), static_cast<const uint64_t*>(src));
      break;
    case DType::kFloat16:
      run16(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), HalfCodec{});
      break;
    case DType::kBFloat16:
      run16(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), BF16Codec{});
      break;
    case DType::kFloat32:
      run(static_cast<float*>(dst), static_cast<const float*>(src));
      break;
    case DType::kFloat64:
      run(static_cast<double*>(dst), static_cast<const double*>(src));
      break;
  }
}

#if DCOMM_CUDA_REDUCE
// The algorithms send what they just reduced, so each device operation completes before it returns.
void finish_cuda(const char* what) { synchronize_cuda(nullptr, Deadline::after(std::chrono::seconds(60)), what); }
#else
[[noreturn]] void no_device_support(const char* fn, const Device& device) {
  throw InvalidUsageError(fmt::format(
      "{}: buffers on {} need dcomm built with CUDA (DCOMM_HAVE_CUDA) and its device reductions; this build has "
      "only host reductions - pass host buffers or rebuild with -Dcuda=enabled",
      fn, to_string(device)));
}
#endif

}  // namespace

void reduce_into(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op, const Device& device) {
  if (count == 0) return;
  if (!device.is_host()) {
#if DCOMM_CUDA_REDUCE
    reduce_cuda(dst, src, count, dtype, op, nullptr);
    return finish_cuda("reduce_into");
#else
    no_device_support("reduce_into", device);
#endif
  }
  bool ok = false;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
    case ReduceOp::kPreMulSum:
      ok = dispatch_dtype<Sum>(dst, src, count, dtype);
      break;
    case ReduceOp::kProd:
      ok = dispatch_dtype<Prod>(dst, src, count, dtype);
      break;
    case ReduceOp::kMin:
      ok = dispatch_dtype<Min>(dst, src, count, dtype);
      break;
    case ReduceOp::kMax:
      ok = dispatch_dtype<Max>(dst, src, count, dtype);
      break;
    case ReduceOp::kBAnd:
      ok = dispatch_dtype<BAnd>(dst, src, count, dtype);
      break;
    case ReduceOp::kBOr:
      ok = dispatch_dtype<BOr>(dst, src, count, dtype);
      break;
    case ReduceOp::kBXor:
      ok = dispatch_dtype<BXor>(dst, src, count, dtype);
      break;
  }
  if (!ok) {
    throw InvalidUsageError(fmt::format("reduce_into: op {} does not apply to dtype {} (bitwise ops need integers)",
                                        to_string(op), to_string(dtype)));
  }
}

void scale_into(void* dst, const void* src, std::size_t count, DType dtype, double scale, const Device& device) {
  if (count == 0) return;
  if (!device.is_host()) {
#if DCOMM_CUDA_REDUCE
    scale_cuda(dst, src, count, dtype, scale, nullptr);
    return finish_cuda("scale_into");
#else
    no_device_support("scale_into", device);
#endif
  }
  if (dtype == DType::kFloat64) {
    map_dtype(dst, src, count, dtype, [scale](auto x) { return static_cast<decltype(x)>(x * scale); });
  } else if (dtype_is_float(dtype)) {
    auto s = static_cast<float>(scale);  // float32 math keeps the loop vectorizable
    map_dtype(dst, src, count, dtype, [s](auto x) { return static_cast<decltype(x)>(static_cast<float>(x) * s); });
  } else {
    map_dtype(dst, src, count, dtype,
              [scale](auto x) { return static_cast<decltype(x)>(static_cast<double>(x) * scale); });
  }
}

void divide_by(void* dst, std::size_t count, DType dtype, int divisor, const Device& device) {
  if (count == 0 || divisor == 1) return;
  if (divisor == 0) throw InvalidUsageError("divide_by: divisor 0");
  if (!device.is_host()) {
#if DCOMM_CUDA_REDUCE
    divide_cuda(dst, count, dtype, divisor, nullptr);
    return finish_cuda("divide_by");
#else
    no_device_support("divide_by", device);
#endif
  }
  map_dtype(dst, dst, count, dtype, [divisor](auto x) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(x / static_cast<T>(divisor));
    } else if constexpr (std::is_signed_v<T>) {
      return static_cast<T>(static_cast<int64_t>(x) / divisor);  // truncates toward zero
    } else {
      return static_cast<T>(static_cast<uint64_t>(x) / static_cast<uint64_t>(divisor < 0 ? -divisor : divisor));
    }
  });
}

void copy_bytes(void* dst, const void* src, std::size_t bytes, const Device& device) {
  if (bytes == 0 || dst == src) return;
  if (!device.is_host()) {
#if DCOMM_CUDA_REDUCE
    copy_cuda(dst, src, bytes, nullptr);
    return finish_cuda("copy_bytes");
#else
    no_device_support("copy_bytes", device);
#endif
  }
  std::memmove(dst, src, bytes);  // callers may move a block within one buffer (in-place all_gather)
}

}  // namespace dcomm::coll
