#pragma once
/// Element types, reduction operations, devices and buffer views: the vocabulary of every call.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace dcomm {

/// Element types every collective supports. 16-bit floats accumulate in float32.
enum class DType : uint8_t { kInt8, kUInt8, kInt32, kUInt32, kInt64, kUInt64, kFloat16, kBFloat16, kFloat32, kFloat64 };
inline constexpr DType kAllDTypes[] = {DType::kInt8,    DType::kUInt8,    DType::kInt32,   DType::kUInt32,
                                       DType::kInt64,   DType::kUInt64,   DType::kFloat16, DType::kBFloat16,
                                       DType::kFloat32, DType::kFloat64};

/// Bytes per element. Inline: every call's size checks and byte counts take it.
inline std::size_t dtype_size(DType t) noexcept {
  // A table, in the enum's order: a load where a switch was a chain of compares on every call's size checks.
  constexpr unsigned char kSizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
  const auto i = static_cast<std::size_t>(t);
  return i < sizeof kSizes ? kSizes[i] : 1;
}
bool dtype_is_float(DType t) noexcept;
const char* to_string(DType t) noexcept;     ///< "float32", "bfloat16", ...
bool parse_dtype(const std::string& name, DType* out) noexcept;

/// Reduction operations. kAvg divides the sum by the group size; kPreMulSum multiplies each input by a scale
/// and sums. The bitwise ones apply to integer types only.
enum class ReduceOp : uint8_t { kSum, kProd, kMin, kMax, kAvg, kPreMulSum, kBAnd, kBOr, kBXor };
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kProd,      ReduceOp::kMin,
                                             ReduceOp::kMax, ReduceOp::kAvg,       ReduceOp::kPreMulSum,
                                             ReduceOp::kBAnd, ReduceOp::kBOr,      ReduceOp::kBXor};
const char* to_string(ReduceOp op) noexcept;  ///< "sum", "premul_sum", ...
bool parse_reduce_op(const std::string& name, ReduceOp* out) noexcept;
/// Whether an op applies to a dtype (bitwise ops need integers).
bool op_fits_dtype(ReduceOp op, DType t) noexcept;

/// A reduction: the op and, for kPreMulSum, the scale each input is multiplied by.
struct Reduction {
  ReduceOp op = ReduceOp::kSum;
  double scale = 1.0;
  Reduction() = default;
  Reduction(ReduceOp o, double s = 1.0) : op(o), scale(s) {}  // NOLINT: implicit from an op on purpose
};

/// Where a buffer lives.
struct Device {
  enum class Kind : uint8_t { kHost, kCuda };
  Kind kind = Kind::kHost;
  int index = 0;
  static Device host() { return {}; }
  static Device cuda(int i) { return {Kind::kCuda, i}; }
  bool is_host() const { return kind == Kind::kHost; }
  bool operator==(const Device&) const = default;
};
std::string to_string(const Device& d);  ///< "host" or "cuda:N"

/// 16-bit float storage types. dcomm converts them to float32 to reduce.
struct Half { uint16_t bits; };
struct BFloat16 { uint16_t bits; };

template <typename T> struct dtype_of;
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::kInt8; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::kUInt8; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct dtype_of<uint32_t> { static constexpr DType value = DType::kUInt32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct dtype_of<uint64_t> { static constexpr DType value = DType::kUInt64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::kFloat16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::kBFloat16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::kFloat32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::kFloat64; };

/// A typed view of memory: pointer, element count, element type and device. It owns nothing.
struct Buffer {
  void* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::kUInt8;
  Device device{};
  /// Device::Kind::kHost unless given; set `detect_device` to have dcomm ask CUDA where the pointer lives.
  bool detect_device = false;

  Buffer() = default;
  Buffer(void* d, std::size_t n, DType t, Device dev = Device::host()) : data(d), count(n), dtype(t), device(dev) {}
  template <typename T>
  Buffer(T* d, std::size_t n) : data(const_cast<std::remove_const_t<T>*>(d)), count(n),  // NOLINT
                                dtype(dtype_of<std::remove_const_t<T>>::value) {}
  template <typename T>
  Buffer(std::vector<T>& v) : Buffer(v.data(), v.size()) {}  // NOLINT: implicit from a vector on purpose
  template <typename T>
  Buffer(std::span<T> s) : Buffer(s.data(), s.size()) {}  // NOLINT

  std::size_t bytes() const { return count * dtype_size(dtype); }
  /// Elements [offset, offset + n) of this buffer.
  Buffer slice(std::size_t offset, std::size_t n) const {
    Buffer b = *this;
    b.data = static_cast<char*>(data) + offset * dtype_size(dtype);
    b.count = n;
    return b;
  }
};

/// Timeouts. kDefaultTimeout defers to the group's configured timeout (DCOMM_TIMEOUT_S, 300 s unless set);
/// kNoTimeout waits forever and is meant for debugging only.
using Duration = std::chrono::milliseconds;
inline constexpr Duration kDefaultTimeout{-1};
inline constexpr Duration kNoTimeout = Duration::max();

/// Receive from whichever rank sends first.
inline constexpr int kAnySource = -1;

}  // namespace dcomm
