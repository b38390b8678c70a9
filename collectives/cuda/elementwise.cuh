#pragma once
// The one element-wise kernel behind reduce_cuda, scale_cuda and divide_cuda: dst[i] = f(dst[i], src[i]) over
// `count` elements, with 16-byte vector loads on the aligned middle and element-wise code for the ends. The element
// functors live here too, so each .cu file only picks a dtype and a functor.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "collectives/cuda/pack_split.hpp"

namespace dcomm::coll::kernels {

// 16-bit floats are stored as such but combined in float32; every other type combines as itself.
template <typename T> struct AccOf { using type = T; };
template <> struct AccOf<__half> { using type = float; };
template <> struct AccOf<__nv_bfloat16> { using type = float; };
template <typename T> using Acc = typename AccOf<T>::type;

template <typename T> __device__ __forceinline__ Acc<T> to_acc(T v) { return v; }
template <> __device__ __forceinline__ float to_acc<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_acc<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_acc(Acc<T> v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half from_acc<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Integer sum and product wrap modulo 2^bits: done in the unsigned type, where wrapping is defined.
template <typename A> __device__ __forceinline__ A wrapping_add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <typename A> __device__ __forceinline__ A wrapping_mul(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    // uint8 operands promote to int; their product (< 2^16) still fits, so no signed overflow can occur.
    using U = std::conditional_t<(sizeof(A) < sizeof(unsigned)), unsigned, std::make_unsigned_t<A>>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

// Binary reductions. min and max keep std::min/std::max's choice on ties so device and host agree bit for bit.
template <typename T> struct SumOp {
  __device__ T operator()(T d, T s) const { return from_acc<T>(wrapping_add(to_acc(d), to_acc(s))); }
};
template <typename T> struct ProdOp {
  __device__ T operator()(T d, T s) const { return from_acc<T>(wrapping_mul(to_acc(d), to_acc(s))); }
};
template <typename T> struct MinOp {
  __device__ T operator()(T d, T s) const { return to_acc(s) < to_acc(d) ? s : d; }
};
template <typename T> struct MaxOp {
  __device__ T operator()(T d, T s) const { return to_acc(d) < to_acc(s) ? s : d; }
};
template <typename T> struct BAndOp {
  __device__ T operator()(T d, T s) const { return static_cast<T>(d & s); }
};
template <typename T> struct BOrOp {
  __device__ T operator()(T d, T s) const { return static_cast<T>(d | s); }
};
template <typename T> struct BXorOp {
  __device__ T operator()(T d, T s) const { return static_cast<T>(d ^ s); }
};

template <typename T>
struct alignas(16) Pack {
  static constexpr int kLanes = 16 / sizeof(T);
  T lane[kLanes];
};

// Grid-stride loops: threads first share the 16-byte packs of the aligned middle, then the few elements of the
// misaligned head and the tail.
template <typename T, typename F>
__global__ void elementwise_kernel(T* dst, const T* src, std::size_t count, PackSplit split, F f) {
  constexpr std::size_t kLanes = Pack<T>::kLanes;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  auto* dst_packs = reinterpret_cast<Pack<T>*>(dst + split.head);
  auto* src_packs = reinterpret_cast<const Pack<T>*>(src + split.head);
  for (std::size_t i = first; i < split.packs; i += stride) {
    Pack<T> d = dst_packs[i];
    const Pack<T> s = src_packs[i];
#pragma unroll
    for (int k = 0; k < Pack<T>::kLanes; ++k) d.lane[k] = f(d.lane[k], s.lane[k]);
    dst_packs[i] = d;
  }
  const std::size_t singles = single_count(split, count, kLanes);
  for (std::size_t j = first; j < singles; j += stride) {
    const std::size_t i = single_index(split, kLanes, j);
    dst[i] = f(dst[i], src[i]);
  }
}

/// Splits [0, count) into a head, 16-byte packs and a tail, and launches the kernel on `stream`.
/// Both pointers must be aligned to sizeof(T) (checked by the caller).
template <typename T, typename F>
void launch_elementwise(T* dst, const T* src, std::size_t count, F f, cudaStream_t stream) {
  constexpr std::size_t kLanes = Pack<T>::kLanes;
  constexpr std::size_t kThreads = 256;
  constexpr std::size_t kMaxBlocks = 4096;  // enough to fill any current GPU; the loops stride over the rest
  const PackSplit split = split_for_packs(reinterpret_cast<std::uintptr_t>(dst), reinterpret_cast<std::uintptr_t>(src),
                                          count, sizeof(T));
  const std::size_t singles = single_count(split, count, kLanes);
  const std::size_t items = split.packs > singles ? split.packs : singles;
  std::size_t blocks = (items + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  if (blocks == 0) blocks = 1;
  elementwise_kernel<T, F><<<static_cast<unsigned>(blocks), static_cast<unsigned>(kThreads), 0, stream>>>(
      dst, src, count, split, f);
}

}  // namespace dcomm::coll::kernels
