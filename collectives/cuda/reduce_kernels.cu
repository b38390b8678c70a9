// The dtype and op dispatch of launch.hpp onto the element-wise kernel of elementwise.cuh.

#include <type_traits>

#include "collectives/cuda/elementwise.cuh"
#include "collectives/cuda/launch.hpp"

namespace dcomm::coll::kernels {
namespace {

// Calls fn(std::type_identity<T>{}) with T the storage type of `dtype`.
template <typename Fn>
void with_storage_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kInt8: return fn(std::type_identity<int8_t>{});
    case DType::kUInt8: return fn(std::type_identity<uint8_t>{});
    case DType::kInt32: return fn(std::type_identity<int32_t>{});
    case DType::kUInt32: return fn(std::type_identity<uint32_t>{});
    case DType::kInt64: return fn(std::type_identity<int64_t>{});
    case DType::kUInt64: return fn(std::type_identity<uint64_t>{});
    case DType::kFloat16: return fn(std::type_identity<__half>{});
    case DType::kBFloat16: return fn(std::type_identity<__nv_bfloat16>{});
    case DType::kFloat32: return fn(std::type_identity<float>{});
    case DType::kFloat64: return fn(std::type_identity<double>{});
  }
}

// Multiplication by a scale: floats in their accumulation type, integers in float64 truncated toward zero.
template <typename T>
struct ScaleOp {
  using Factor = std::conditional_t<std::is_same_v<Acc<T>, float>, float, double>;
  Factor factor;
  __device__ T operator()(T, T s) const {
    return from_acc<T>(static_cast<Acc<T>>(static_cast<Factor>(to_acc(s)) * factor));
  }
};

template <typename T>
struct DivideOp {
  Acc<T> divisor;
  __device__ T operator()(T d, T) const { return from_acc<T>(to_acc(d) / divisor); }
};

}  // namespace

void launch_reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  with_storage_type(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* d = static_cast<T*>(dst);
    const T* in = static_cast<const T*>(src);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
      case ReduceOp::kPreMulSum: return launch_elementwise(d, in, count, SumOp<T>{}, s);
      case ReduceOp::kProd: return launch_elementwise(d, in, count, ProdOp<T>{}, s);
      case ReduceOp::kMin: return launch_elementwise(d, in, count, MinOp<T>{}, s);
      case ReduceOp::kMax: return launch_elementwise(d, in, count, MaxOp<T>{}, s);
      case ReduceOp::kBAnd:
      case ReduceOp::kBOr:
      case ReduceOp::kBXor:
        // Bitwise ops exist for integers only; the caller rejected them on floats.
        if constexpr (std::is_integral_v<T>) {
          if (op == ReduceOp::kBAnd) return launch_elementwise(d, in, count, BAndOp<T>{}, s);
          if (op == ReduceOp::kBOr) return launch_elementwise(d, in, count, BOrOp<T>{}, s);
          return launch_elementwise(d, in, count, BXorOp<T>{}, s);
        }
        return;
    }
  });
}

void launch_scale(void* dst, const void* src, std::size_t count, DType dtype, double scale, void* stream) {
  with_storage_type(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Op = ScaleOp<T>;
    launch_elementwise(static_cast<T*>(dst), static_cast<const T*>(src), count,
                       Op{static_cast<typename Op::Factor>(scale)}, static_cast<cudaStream_t>(stream));
  });
}

void launch_divide(void* dst, std::size_t count, DType dtype, int divisor, void* stream) {
  with_storage_type(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* d = static_cast<T*>(dst);
    launch_elementwise(d, d, count, DivideOp<T>{static_cast<Acc<T>>(divisor)}, static_cast<cudaStream_t>(stream));
  });
}

}  // namespace dcomm::coll::kernels
