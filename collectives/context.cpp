#include "collectives/context.hpp"

#include <fmt/format.h>

#include <dcomm/error.hpp>
#include <utility>

#include "collectives/reduce.hpp"
#include "transports/tags.hpp"

namespace dcomm::coll {

bool on_device(const Args& args) { return !args.send.device.is_host() || !args.recv.device.is_host(); }

bool device_pieces(const Args& args) { return on_device(args) && !args.vector_variant; }

Context Context::on(const GroupView& sub, uint32_t base) const {
  if (sub.rank < 0 || step_base_ + base >= kCheckStepBase) {
    throw Error(ErrorCode::kInternal, fmt::format("{}: a phase on a part of the group {} - a bug, please report it",
                                                  what, sub.rank < 0 ? "this rank is not in" : "ran out of steps"));
  }
  Context c(args, sub, deadline, seq, what, chunk_bytes);
  c.work = work;
  c.work_count = work_count;
  c.step_base_ = step_base_ + base;
  return c;
}

ReduceOp Context::op() const {
  ReduceOp op = args.red.op;
  return op == ReduceOp::kAvg || op == ReduceOp::kPreMulSum ? ReduceOp::kSum : op;
}

std::size_t Context::chunk_elems() const { return chunk_bytes / esize_ > 0 ? chunk_bytes / esize_ : 1; }

namespace {

int world_rank(const GroupView& v, int peer) {
  return v.world_ranks.empty() ? peer : v.world_ranks[static_cast<std::size_t>(peer)];
}

}  // namespace

transport::RequestPtr Context::isend(int peer, uint32_t step, const void* data, std::size_t bytes) const {
  return view.mesh->isend(world_rank(view, peer), transport::collective_tag(view.context, seq, step + step_base_), data,
                          bytes, device_);
}

transport::RequestPtr Context::irecv(int peer, uint32_t step, void* data, std::size_t bytes) const {
  return view.mesh->irecv(world_rank(view, peer), transport::collective_tag(view.context, seq, step + step_base_), data,
                          bytes, device_);
}

void Context::wait(const transport::RequestPtr& r) const {
  view.mesh->wait(*r, deadline, what);
  if (r->kind == transport::Request::Kind::kRecv && r->received != r->capacity) {
    throw InvalidUsageError(
        fmt::format("{}: received {} from rank {} where {} were expected; the ranks' calls disagree on sizes (counts, "
                    "displacements or dtypes) - check that every rank passes matching arguments",
                    what, format_bytes(r->received), r->source, format_bytes(r->capacity)));
  }
}

std::size_t Context::wait_received(const transport::RequestPtr& r) const {
  view.mesh->wait(*r, deadline, what);
  return r->received;
}

void Context::wait_all(std::vector<transport::RequestPtr>& rs) const {
  for (auto& r : rs) wait(r);
  rs.clear();
}

void Context::send(int peer, uint32_t step, const void* data, std::size_t bytes) const {
  wait(isend(peer, step, data, bytes));
}

void Context::recv(int peer, uint32_t step, void* data, std::size_t bytes) const {
  wait(irecv(peer, step, data, bytes));
}

void Context::sendrecv(int to, const void* sdata, std::size_t sbytes, int from, void* rdata, std::size_t rbytes,
                       uint32_t step) const {
  auto r = irecv(from, step, rdata, rbytes);
  auto s = isend(to, step, sdata, sbytes);
  wait(r);
  wait(s);
}

void Context::reduce(void* dst, const void* src, std::size_t count) const {
  reduce_into(dst, src, count, dtype_, op(), device_);
}

Scratch Context::scratch(std::size_t count) const {
  try {
    return Scratch(count * esize_, device_);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{} (call #{}): {}", what, seq, e.what()));
  }
}

void Context::copy(void* dst, const void* src, std::size_t count) const {
  copy_bytes(dst, src, count * esize_, device_);
}

}  // namespace dcomm::coll
