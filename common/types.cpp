#include <dcomm/types.hpp>

#include <string>

namespace dcomm {

bool dtype_is_float(DType t) noexcept {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 || t == DType::kFloat64;
}

const char* to_string(DType t) noexcept {
  switch (t) {
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kUInt32: return "uint32";
    case DType::kInt64: return "int64";
    case DType::kUInt64: return "uint64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
  }
  return "unknown";
}

bool parse_dtype(const std::string& name, DType* out) noexcept {
  for (DType t : kAllDTypes) {
    if (name == to_string(t)) {
      *out = t;
      return true;
    }
  }
  // Common aliases.
  struct Alias { const char* name; DType t; };
  static const Alias kAliases[] = {{"half", DType::kFloat16}, {"fp16", DType::kFloat16}, {"bf16", DType::kBFloat16},
                                   {"float", DType::kFloat32}, {"fp32", DType::kFloat32}, {"double", DType::kFloat64},
                                   {"fp64", DType::kFloat64}, {"int", DType::kInt32}, {"char", DType::kInt8}};
  for (const Alias& a : kAliases) {
    if (name == a.name) {
      *out = a.t;
      return true;
    }
  }
  return false;
}

const char* to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kPreMulSum: return "premul_sum";
    case ReduceOp::kBAnd: return "band";
    case ReduceOp::kBOr: return "bor";
    case ReduceOp::kBXor: return "bxor";
  }
  return "unknown";
}

bool parse_reduce_op(const std::string& name, ReduceOp* out) noexcept {
  for (ReduceOp op : kAllReduceOps) {
    if (name == to_string(op)) {
      *out = op;
      return true;
    }
  }
  return false;
}

bool op_fits_dtype(ReduceOp op, DType t) noexcept {
  bool bitwise = op == ReduceOp::kBAnd || op == ReduceOp::kBOr || op == ReduceOp::kBXor;
  return !(bitwise && dtype_is_float(t));
}

std::string to_string(const Device& d) {
  return d.is_host() ? std::string("host") : "cuda:" + std::to_string(d.index);
}

}  // namespace dcomm
