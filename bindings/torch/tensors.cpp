#include "tensors.hpp"

#include <c10/util/Exception.h>

#if DCOMM_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace dcomm_torch {
namespace {

bool dtype_of(at::ScalarType s, dcomm::DType* out) {
  switch (s) {
    case at::kBool: *out = dcomm::DType::kUInt8; return true;
    case at::kByte: *out = dcomm::DType::kUInt8; return true;
    case at::kChar: *out = dcomm::DType::kInt8; return true;
    case at::kInt: *out = dcomm::DType::kInt32; return true;
    case at::kLong: *out = dcomm::DType::kInt64; return true;
    case at::kHalf: *out = dcomm::DType::kFloat16; return true;
    case at::kBFloat16: *out = dcomm::DType::kBFloat16; return true;
    case at::kFloat: *out = dcomm::DType::kFloat32; return true;
    case at::kDouble: *out = dcomm::DType::kFloat64; return true;
    // Complex numbers travel as pairs of reals (staged() takes the real view).
    case at::kComplexFloat: *out = dcomm::DType::kFloat32; return true;
    case at::kComplexDouble: *out = dcomm::DType::kFloat64; return true;
    default: return false;
  }
}

}  // namespace

void check_tensor(const at::Tensor& t, const char* op) {
  dcomm::DType d;
  TORCH_CHECK(t.defined(), "dcomm: ", op, " was given an undefined tensor");
  TORCH_CHECK(dtype_of(t.scalar_type(), &d), "dcomm: ", op, " cannot carry dtype ", t.scalar_type(),
              "; dcomm has bool, uint8, int8, int32, int64, float16, bfloat16, float32, float64 and complex64/128 "
              "(as pairs of reals)");
  TORCH_CHECK(!t.is_sparse(), "dcomm: ", op, " does not support sparse tensors");
  if (t.is_cuda()) {
#if DCOMM_TORCH_CUDA
    TORCH_CHECK(at::hasCUDA(), "dcomm: ", op, " got a CUDA tensor but torch reports no CUDA device");
#else
    TORCH_CHECK(false, "dcomm: ", op, " got a CUDA tensor, but dcomm_torch was built against a torch without CUDA; "
                "rebuild dcomm against a CUDA torch, or use CPU tensors");
#endif
  } else {
    TORCH_CHECK(t.device().is_cpu(), "dcomm: ", op, " supports CPU and CUDA tensors, not ", t.device());
  }
}

void check_tensors(const std::vector<at::Tensor>& ts, const char* op, bool same_shape) {
  for (const auto& t : ts) {
    check_tensor(t, op);
    if (same_shape) {
      TORCH_CHECK(t.scalar_type() == ts[0].scalar_type() && t.numel() == ts[0].numel(), "dcomm: ", op,
                  " needs tensors of one dtype and size; got ", ts[0].scalar_type(), "[", ts[0].numel(), "] and ",
                  t.scalar_type(), "[", t.numel(), "]");
      TORCH_CHECK(t.device() == ts[0].device(), "dcomm: ", op, " needs tensors on one device; got ", ts[0].device(),
                  " and ", t.device());
    }
  }
}

void check_coalescible(const std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK(!ts.empty(), "dcomm: ", op, " requires a non-empty tensor list");
  for (const auto& t : ts) {
    check_tensor(t, op);
    TORCH_CHECK(t.scalar_type() == ts[0].scalar_type() && t.device() == ts[0].device(), "dcomm: ", op,
                " flattens its tensors into one buffer, so they must share a dtype and a device; got ",
                ts[0].scalar_type(), " on ", ts[0].device(), " and ", t.scalar_type(), " on ", t.device());
  }
}

at::Tensor flatten(const std::vector<at::Tensor>& ts) {
  int64_t total = 0;
  for (const auto& t : ts) total += t.numel();
  at::Tensor flat = at::empty({total}, ts[0].options().memory_format(c10::nullopt));
  int64_t at = 0;
  for (const auto& t : ts) {
    if (t.numel() > 0) flat.narrow(0, at, t.numel()).view(t.sizes()).copy_(t);
    at += t.numel();
  }
  return flat;
}

void unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& ts) {
  int64_t at = 0;
  for (const auto& t : ts) {
    if (t.numel() > 0) t.copy_(flat.narrow(0, at, t.numel()).view(t.sizes()));
    at += t.numel();
  }
}

at::Tensor staged(const at::Tensor& t) {
  at::Tensor c = t.is_contiguous() ? t : t.contiguous();
  if (c.is_complex()) c = at::view_as_real(c);
  return c;
}

void copy_back(const at::Tensor& stage, const at::Tensor& user) {
  if (user.numel() == 0) return;  // (a row of an empty stage may sit at an odd offset view_as_complex refuses)
  at::Tensor s = user.is_complex() ? at::view_as_complex(stage.view({user.numel(), 2})) : stage;
  if (s.data_ptr() == user.data_ptr() && user.is_contiguous()) return;
  user.copy_(s.view(user.sizes()));
}

dcomm::Buffer buffer_of(const at::Tensor& c) {
  dcomm::DType d = dcomm::DType::kUInt8;
  dtype_of(c.scalar_type(), &d);
  dcomm::Device dev = c.is_cuda() ? dcomm::Device::cuda(c.get_device()) : dcomm::Device::host();
  return dcomm::Buffer(c.data_ptr(), static_cast<std::size_t>(c.numel()), d, dev);
}

dcomm::Buffer empty_buffer_like(const at::Tensor& t) {
  // The type and device only: staging `t` (a copy when it is not contiguous) would be a pass for nothing.
  dcomm::Buffer b = buffer_of(t);
  b.data = nullptr;
  b.count = 0;
  return b;
}

dcomm::Reduction reduction_of(const c10d::ReduceOp& op, const at::Tensor& t, const char* call) {
  using R = c10d::ReduceOp;
  const bool is_bool = t.scalar_type() == at::kBool;
  const bool is_float = at::isFloatingType(t.scalar_type()) || t.is_complex();
  switch (op.op_) {
    case R::SUM: return is_bool ? dcomm::ReduceOp::kMax : dcomm::ReduceOp::kSum;
    case R::AVG:
      TORCH_CHECK(!is_bool, "dcomm: ", call, " cannot average bool tensors");
      return dcomm::ReduceOp::kAvg;
    case R::PRODUCT:
      TORCH_CHECK(!t.is_complex(), "dcomm: ", call, " reduces complex tensors with SUM and AVG only");
      return is_bool ? dcomm::ReduceOp::kMin : dcomm::ReduceOp::kProd;
    case R::MIN:
    case R::MAX:
      TORCH_CHECK(!t.is_complex(), "dcomm: ", call, " cannot take the min or max of complex numbers");
      return op.op_ == R::MIN ? dcomm::ReduceOp::kMin : dcomm::ReduceOp::kMax;
    case R::BAND:
    case R::BOR:
    case R::BXOR:
      TORCH_CHECK(!is_float, "dcomm: ", call, " applies bitwise ops to integer and bool tensors only, not ",
                  t.scalar_type());
      return op.op_ == R::BAND ? dcomm::ReduceOp::kBAnd
             : op.op_ == R::BOR ? dcomm::ReduceOp::kBOr
                                : dcomm::ReduceOp::kBXor;
    case R::PREMUL_SUM: {
      auto* s = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(s != nullptr, "dcomm: ", call, " got PREMUL_SUM without its factor");
      double scale = s->double_factor;
      if (!s->tensor_factors.empty()) {
        TORCH_CHECK(s->tensor_factors[0].numel() == 1, "dcomm: ", call, " takes a one-element PREMUL_SUM factor");
        scale = s->tensor_factors[0].item<double>();
      }
      return dcomm::Reduction(dcomm::ReduceOp::kPreMulSum, scale);
    }
    default: break;
  }
  TORCH_CHECK(false, "dcomm: ", call, " does not support ReduceOp ", static_cast<int>(op.op_));
}

void* current_stream(const at::Tensor& t) {
#if DCOMM_TORCH_CUDA
  if (t.is_cuda()) return c10::cuda::getCurrentCUDAStream(t.get_device()).stream();
#else
  (void)t;
#endif
  return nullptr;
}

}  // namespace dcomm_torch
