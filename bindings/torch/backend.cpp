// The collectives of the "dcomm" backend: each stages its tensors as contiguous dcomm buffers, issues the dcomm
// call and returns a Work whose finisher copies staged results back into the caller's tensors.

#include "backend.hpp"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <dcomm/dcomm.hpp>
#include <limits>
#include <numeric>

#include "tensors.hpp"

namespace dcomm_torch {
namespace {

// Host collectives run on the calling thread (dcomm's blocking path, as dcomm-bench runs them): torch waits for
// them at once unless async_op is set, and handing a call to dcomm's worker thread costs two thread wake-ups whose
// latency puts the ranks out of step. Profiled at 16 MiB on 2 ranks: with the hand-off, the first barrier of
// all_reduce[shm_direct] waited past its spin and yield phases and slept about 5 times per call; inline, never.
// DCOMM_TORCH_ASYNC_BYTES=N hands host calls above N bytes to the worker instead, for programs that overlap
// collectives with computation on cores of their own (DDP's buckets with async_op).
std::size_t async_bytes_from_environment() {
  const char* v = std::getenv("DCOMM_TORCH_ASYNC_BYTES");
  if (v == nullptr || *v == '\0') return std::numeric_limits<std::size_t>::max();
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  TORCH_CHECK(errno == 0 && *end == '\0' && v[0] != '-', "dcomm: DCOMM_TORCH_ASYNC_BYTES='", v,
              "' is not a byte count (unset it to run host collectives on the calling thread)");
  return static_cast<std::size_t>(n);
}

dcomm::Duration duration_of(std::chrono::milliseconds t) {
  return t == c10d::kUnsetTimeout ? dcomm::kDefaultTimeout : dcomm::Duration(t.count());
}

void check_one(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "dcomm: ", op, " takes one tensor per process, got ", tensors.size());
  check_tensor(tensors[0], op);
}

void check_rank(int r, int size, const char* what, const char* op) {
  TORCH_CHECK(r >= 0 && r < size, "dcomm: ", op, ": ", what, " ", r, " is not a rank of this group of ", size);
}

// A stage for `n` elements of `like`'s staged dtype, one row per rank: the flat buffer of allgather and friends.
at::Tensor rows_like(const at::Tensor& like, int64_t rows) {
  at::Tensor s = staged(like);
  return at::empty({rows, s.numel()}, s.options());
}

std::size_t to_size(int64_t v) { return static_cast<std::size_t>(v); }

// Packed displacements of blocks of `counts` elements.
std::vector<std::size_t> displs(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> d(counts.size(), 0);
  for (std::size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
  return d;
}

}  // namespace

DcommBackend::DcommBackend(dcomm::ProcessGroupPtr pg, int rank, int size, std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size),
      pg_(std::move(pg)),
      poller_(std::make_shared<Poller>()),
      timeout_(duration_of(timeout) == dcomm::kDefaultTimeout ? pg_->timeout() : duration_of(timeout)),
      async_bytes_(async_bytes_from_environment()) {
  init();
}

DcommBackend::~DcommBackend() = default;

c10::intrusive_ptr<c10d::Work> DcommBackend::make_work(c10d::OpType type, std::vector<dcomm::WorkPtr> works,
                                                       std::function<void()> finish, std::vector<at::Tensor> outputs) {
  ++seq_;
  auto w =
      c10::make_intrusive<DcommWork>(getRank(), type, std::move(works), std::move(finish), std::move(outputs), poller_);
  w->poll();  // a blocking call is complete already: copy its results back now
  return w;
}

dcomm::WorkPtr DcommBackend::issue(const std::function<dcomm::WorkPtr()>& call) {
  ++collective_calls_;
  try {
    return call();
  } catch (const dcomm::TimeoutError&) {
    std::rethrow_exception(for_torch(std::current_exception()));
  }
}

dcomm::CollectiveOptions DcommBackend::options(std::chrono::milliseconds timeout, const at::Tensor& t) {
  dcomm::CollectiveOptions o;
  o.timeout = timeout == c10d::kUnsetTimeout ? timeout_ : duration_of(timeout);
  o.stream = current_stream(t);
  o.async_op = t.is_cuda() || static_cast<std::size_t>(t.nbytes()) > async_bytes_;
  return o;
}

c10::intrusive_ptr<c10d::Work> DcommBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                       const c10d::BroadcastOptions& opts) {
  check_one(tensors, "broadcast");
  check_rank(static_cast<int>(opts.rootRank), size_, "root", "broadcast");
  at::Tensor t = tensors[0], s = staged(t);
  auto w =
      issue([&] { return pg_->broadcast(buffer_of(s), static_cast<int>(opts.rootRank), options(opts.timeout, s)); });
  return make_work(
      c10d::OpType::BROADCAST, {w}, [s, t] { copy_back(s, t); }, tensors);
}

c10::intrusive_ptr<c10d::Work> DcommBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::AllreduceOptions& opts) {
  check_one(tensors, "allreduce");
  at::Tensor t = tensors[0], s = staged(t);
  dcomm::Reduction red = reduction_of(opts.reduceOp, t, "allreduce");
  auto w = issue([&] { return pg_->all_reduce(buffer_of(s), red, options(opts.timeout, s)); });
  return make_work(
      c10d::OpType::ALLREDUCE, {w}, [s, t] { copy_back(s, t); }, tensors);
}

c10::intrusive_ptr<c10d::Work> DcommBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                 const c10d::AllreduceCoalescedOptions& opts) {
  // As gloo does: one collective over the tensors flattened into one buffer, which therefore share a dtype and a
  // device (they may differ in shape).
  check_coalescible(tensors, "allreduce_coalesced");
  dcomm::Reduction red = reduction_of(opts.reduceOp, tensors[0], "allreduce_coalesced");
  at::Tensor flat = flatten(tensors), s = staged(flat);
  auto w = issue([&] { return pg_->all_reduce(buffer_of(s), red, options(opts.timeout, s)); });
  std::vector<at::Tensor> users = tensors;
  return make_work(
      c10d::OpType::ALLREDUCE_COALESCED, {w}, [flat, users] { unflatten(flat, users); }, tensors);
}

c10::intrusive_ptr<c10d::Work> DcommBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  check_one(tensors, "reduce");
  check_rank(static_cast<int>(opts.rootRank), size_, "root", "reduce");
  at::Tensor t = tensors[0], s = staged(t);
  const int root = static_cast<int>(opts.rootRank);
  // Only the root's tensor changes (in place); the others keep their input, as with gloo, and pass no output
  // (dcomm reads a reduce's recv on the root only: no buffer of the tensor's size to allocate on every call).
  dcomm::Buffer out = rank_ == root ? buffer_of(s) : empty_buffer_like(s);
  auto w = issue([&] {
    return pg_->reduce(buffer_of(s), out, root, reduction_of(opts.reduceOp, t, "reduce"), options(opts.timeout, s));
  });
  return make_work(
      c10d::OpType::REDUCE, {w}, [s, t] { copy_back(s, t); }, tensors);
}

c10::intrusive_ptr<c10d::Work> DcommBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllgatherOptions& opts) {
  check_one(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == to_size(size_), "dcomm: allgather needs one list of ", size_,
              " output tensors");
  std::vector<at::Tensor> outs = outputs[0];
  outs.push_back(inputs[0]);
  check_tensors(outs, "allgather", true);
  outs.pop_back();
  at::Tensor s = staged(inputs[0]), flat = rows_like(inputs[0], size_);
  auto w = issue([&] { return pg_->all_gather(buffer_of(s), buffer_of(flat), options(opts.timeout, flat)); });
  return make_work(
      c10d::OpType::ALLGATHER, {w},
      [flat, outs] {
        for (std::size_t r = 0; r < outs.size(); ++r) copy_back(flat[static_cast<int64_t>(r)], outs[r]);
      },
      outs);
}

c10::intrusive_ptr<c10d::Work> DcommBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                             const c10d::AllgatherOptions& opts) {
  check_tensor(input, "_allgather_base");
  check_tensor(output, "_allgather_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type() && output.numel() == input.numel() * size_,
              "dcomm: _allgather_base needs an output of ", size_, " x ", input.numel(), " ", input.scalar_type(),
              ", got ", output.numel(), " ", output.scalar_type());
  at::Tensor s = staged(input), so = staged(output);
  auto w = issue([&] { return pg_->all_gather(buffer_of(s), buffer_of(so), options(opts.timeout, so)); });
  return make_work(c10d::OpType::_ALLGATHER_BASE, {w}, [so, output] { copy_back(so, output); }, {output});
}

c10::intrusive_ptr<c10d::Work> DcommBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) {
  // As gloo does: one all_gather of the inputs flattened into one buffer; rank r's row of the result holds its
  // inputs in order, copied out into outputs[r].
  check_coalescible(inputs, "allgather_coalesced");
  TORCH_CHECK(outputs.size() == to_size(size_), "dcomm: allgather_coalesced needs ", size_, " output lists, got ",
              outputs.size());
  for (const auto& list : outputs) {
    TORCH_CHECK(list.size() == inputs.size(), "dcomm: allgather_coalesced needs output lists of ", inputs.size(),
                " tensors (one per input), got one of ", list.size());
    for (std::size_t i = 0; i < list.size(); ++i) check_tensors({list[i], inputs[i]}, "allgather_coalesced", true);
  }
  at::Tensor flat = flatten(inputs), s = staged(flat);
  at::Tensor rows = at::empty({size_, flat.numel()}, flat.options()), so = staged(rows);
  auto w = issue([&] { return pg_->all_gather(buffer_of(s), buffer_of(so), options(opts.timeout, so)); });
  auto outs = outputs;
  std::vector<at::Tensor> all;
  for (const auto& l : outputs) all.insert(all.end(), l.begin(), l.end());
  return make_work(
      c10d::OpType::ALLGATHER_COALESCED, {w},
      [rows, outs] {
        for (std::size_t r = 0; r < outs.size(); ++r) unflatten(rows[static_cast<int64_t>(r)], outs[r]);
      },
      all);
}

c10::intrusive_ptr<c10d::Work> DcommBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                    std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  check_one(inputs, "gather");
  const int root = static_cast<int>(opts.rootRank);
  check_rank(root, size_, "root", "gather");
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == to_size(size_), "dcomm: gather needs one list of ", size_,
                " output tensors on the root");
    outs = outputs[0];
    outs.push_back(inputs[0]);
    check_tensors(outs, "gather", true);
    outs.pop_back();
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "dcomm: gather takes output tensors on the root only");
  }
  at::Tensor s = staged(inputs[0]);
  at::Tensor flat = rank_ == root ? rows_like(inputs[0], size_) : at::Tensor();
  dcomm::Buffer recv = rank_ == root ? buffer_of(flat) : empty_buffer_like(inputs[0]);
  auto w = issue([&] { return pg_->gather(buffer_of(s), recv, root, options(opts.timeout, s)); });
  return make_work(
      c10d::OpType::GATHER, {w},
      [flat, outs] {
        for (std::size_t r = 0; r < outs.size(); ++r) copy_back(flat[static_cast<int64_t>(r)], outs[r]);
      },
      outs);
}

c10::intrusive_ptr<c10d::Work> DcommBackend::scatter(std::vector<at::Tensor>& outputs,
                                                     std::vector<std::vector<at::Tensor>>& inputs,
                                                     const c10d::ScatterOptions& opts) {
  check_one(outputs, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  check_rank(root, size_, "root", "scatter");
  at::Tensor out = outputs[0], so = staged(out);
  at::Tensor flat;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == to_size(size_), "dcomm: scatter needs one list of ", size_,
                " input tensors on the root");
    std::vector<at::Tensor> ins = inputs[0];
    ins.push_back(out);
    check_tensors(ins, "scatter", true);
    ins.pop_back();
    flat = rows_like(out, size_);
    for (int r = 0; r < size_; ++r) flat[r].copy_(staged(ins[static_cast<std::size_t>(r)]).view({-1}));
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "dcomm: scatter takes input tensors on the root only");
  }
  dcomm::Buffer send = rank_ == root ? buffer_of(flat) : empty_buffer_like(out);
  auto w = issue([&] { return pg_->scatter(send, buffer_of(so), root, options(opts.timeout, so)); });
  return make_work(
      c10d::OpType::SCATTER, {w}, [so, out, flat] { copy_back(so, out); }, outputs);
}

c10::intrusive_ptr<c10d::Work> DcommBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                            std::vector<std::vector<at::Tensor>>& inputs,
                                                            const c10d::ReduceScatterOptions& opts) {
  check_one(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == to_size(size_), "dcomm: reduce_scatter needs one list of ",
              size_, " input tensors");
  std::vector<at::Tensor> ins = inputs[0];
  ins.push_back(outputs[0]);
  check_tensors(ins, "reduce_scatter", true);
  ins.pop_back();
  at::Tensor out = outputs[0], so = staged(out), flat = rows_like(out, size_);
  for (int r = 0; r < size_; ++r) flat[r].copy_(staged(ins[static_cast<std::size_t>(r)]).view({-1}));
  auto w = issue([&] {
    return pg_->reduce_scatter(buffer_of(flat), buffer_of(so), reduction_of(opts.reduceOp, out, "reduce_scatter"),
                               options(opts.timeout, flat));
  });
  return make_work(
      c10d::OpType::REDUCE_SCATTER, {w}, [so, out, flat] { copy_back(so, out); }, outputs);
}

c10::intrusive_ptr<c10d::Work> DcommBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::ReduceScatterOptions& opts) {
  check_tensor(input, "_reduce_scatter_base");
  check_tensor(output, "_reduce_scatter_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type() && input.numel() == output.numel() * size_,
              "dcomm: _reduce_scatter_base needs an input of ", size_, " x ", output.numel(), " ", output.scalar_type(),
              ", got ", input.numel(), " ", input.scalar_type());
  at::Tensor s = staged(input), so = staged(output);
  auto w = issue([&] {
    return pg_->reduce_scatter(buffer_of(s), buffer_of(so), reduction_of(opts.reduceOp, output, "_reduce_scatter_base"),
                               options(opts.timeout, s));
  });
  return make_work(c10d::OpType::_REDUCE_SCATTER_BASE, {w}, [so, output, s] { copy_back(so, output); }, {output});
}

c10::intrusive_ptr<c10d::Work> DcommBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                           std::vector<int64_t>& output_splits,
                                                           std::vector<int64_t>& input_splits,
                                                           const c10d::AllToAllOptions& opts) {
  check_tensors({output, input}, "alltoall_base", false);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "dcomm: alltoall_base needs one dtype, got ",
              input.scalar_type(), " and ", output.scalar_type());
  at::Tensor s = staged(input), so = staged(output);
  // Split sizes count rows (dim 0); dcomm counts elements. No splits: equal blocks of dim 0.
  auto counts = [&](const std::vector<int64_t>& splits, const at::Tensor& t, const at::Tensor& st, const char* what) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const int64_t per_row = rows == 0 ? 0 : st.numel() / rows;
    std::vector<std::size_t> c(to_size(size_));
    if (splits.empty()) {
      TORCH_CHECK(rows % size_ == 0, "dcomm: alltoall_base: the ", what, "'s ", rows, " rows do not split evenly over ",
                  size_, " ranks; pass split sizes");
      for (auto& x : c) x = to_size(rows / size_ * per_row);
    } else {
      TORCH_CHECK(splits.size() == to_size(size_), "dcomm: alltoall_base needs ", size_, " ", what,
                  " split sizes, got ", splits.size());
      int64_t sum = 0;
      for (std::size_t i = 0; i < c.size(); ++i) {
        TORCH_CHECK(splits[i] >= 0, "dcomm: alltoall_base: negative ", what, " split size ", splits[i]);
        c[i] = to_size(splits[i] * per_row);
        sum += splits[i];
      }
      TORCH_CHECK(sum == rows, "dcomm: alltoall_base: the ", what, " split sizes add up to ", sum, " rows, the ", what,
                  " has ", rows);
    }
    return c;
  };
  auto sc = counts(input_splits, input, s, "input"), rc = counts(output_splits, output, so, "output");
  auto w = issue([&] {
    return pg_->all_to_all_v(buffer_of(s), sc, displs(sc), buffer_of(so), rc, displs(rc), options(opts.timeout, s));
  });
  return make_work(c10d::OpType::ALLTOALL_BASE, {w}, [so, output, s] { copy_back(so, output); }, {output});
}

c10::intrusive_ptr<c10d::Work> DcommBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                      const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(outputs.size() == to_size(size_) && inputs.size() == to_size(size_), "dcomm: alltoall needs ", size_,
              " input and output tensors, got ", inputs.size(), " and ", outputs.size());
  check_tensors(inputs, "alltoall", false);
  check_tensors(outputs, "alltoall", false);
  std::vector<at::Tensor> in_flat, out_shape;
  std::vector<std::size_t> sc, rc;
  for (int r = 0; r < size_; ++r) {
    const auto& i = inputs[static_cast<std::size_t>(r)];
    const auto& o = outputs[static_cast<std::size_t>(r)];
    TORCH_CHECK(i.scalar_type() == inputs[0].scalar_type() && o.scalar_type() == inputs[0].scalar_type(),
                "dcomm: alltoall needs tensors of one dtype");
    in_flat.push_back(staged(i).reshape({-1}));
    sc.push_back(to_size(in_flat.back().numel()));
    rc.push_back(to_size(staged(o).numel()));
  }
  at::Tensor s = at::cat(in_flat);
  at::Tensor so = at::empty({static_cast<int64_t>(std::accumulate(rc.begin(), rc.end(), std::size_t{0}))}, s.options());
  auto rd = displs(rc);
  auto w = issue(
      [&] { return pg_->all_to_all_v(buffer_of(s), sc, displs(sc), buffer_of(so), rc, rd, options(opts.timeout, s)); });
  std::vector<at::Tensor> outs = outputs;
  return make_work(
      c10d::OpType::ALLTOALL, {w},
      [so, outs, rc, rd, s] {
        for (std::size_t r = 0; r < outs.size(); ++r) {
          copy_back(so.narrow(0, static_cast<int64_t>(rd[r]), static_cast<int64_t>(rc[r])), outs[r]);
        }
      },
      outputs);
}

c10::intrusive_ptr<c10d::Work> DcommBackend::barrier(const c10d::BarrierOptions& opts) {
  dcomm::CollectiveOptions o;
  o.timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : duration_of(opts.timeout);
  return make_work(c10d::OpType::BARRIER, {issue([&] { return pg_->barrier(o); })}, nullptr, {});
}

void DcommBackend::setSequenceNumberForGroup() { seq_ = 0; }

uint64_t DcommBackend::getSequenceNumberForGroup() { return seq_.load(); }

}  // namespace dcomm_torch
