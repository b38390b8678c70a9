#pragma once
// Tensors as dcomm buffers: the dtype map, staging of non-contiguous and complex tensors, and torch's ReduceOp as
// a dcomm Reduction.

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <dcomm/types.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

namespace dcomm_torch {

/// Throws (RuntimeError in Python) unless dcomm can carry `t`: a dtype it has, on the host or (with a CUDA torch)
/// a CUDA device. `op` names the call.
void check_tensor(const at::Tensor& t, const char* op);
/// Every tensor checked, and all of one dtype and numel when `same_shape`.
void check_tensors(const std::vector<at::Tensor>& ts, const char* op, bool same_shape);

/// Checks a coalesced call's list: not empty, every tensor checked, all of one dtype and device (as gloo asks).
void check_coalescible(const std::vector<at::Tensor>& ts, const char* op);
/// The tensors' elements one after another in a new 1-D tensor of their dtype (one pass over them).
at::Tensor flatten(const std::vector<at::Tensor>& ts);
/// Copies consecutive runs of `flat` back into `ts`, in order and in their shapes (one pass).
void unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& ts);

/// A contiguous tensor holding `t`'s elements (`t` itself when it already is one); complex tensors as their real
/// view (twice the elements). Write results back with copy_back.
at::Tensor staged(const at::Tensor& t);
/// Copies `stage` back into `user` when they are not the same memory.
void copy_back(const at::Tensor& stage, const at::Tensor& user);
/// A dcomm buffer over a contiguous, non-complex tensor (bool as uint8).
dcomm::Buffer buffer_of(const at::Tensor& contiguous);
/// An empty buffer of `t`'s type, for the arguments that matter on the root only.
dcomm::Buffer empty_buffer_like(const at::Tensor& t);

/// torch's op on `t` as dcomm's reduction. bool reduces as uint8 with sum -> max and product -> min (logical or,
/// and) as NCCL does; complex only sums (and averages). Throws for a pair dcomm cannot reduce.
dcomm::Reduction reduction_of(const c10d::ReduceOp& op, const at::Tensor& t, const char* call);

/// The cudaStream_t of torch's current stream on `t`'s device; null for host tensors.
void* current_stream(const at::Tensor& t);

}  // namespace dcomm_torch
