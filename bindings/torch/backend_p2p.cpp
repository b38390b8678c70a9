// Point-to-point and the monitored barrier of the "dcomm" backend.

#include <dcomm/dcomm.hpp>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "backend.hpp"
#include "tensors.hpp"

namespace dcomm_torch {
namespace {

// monitoredBarrier's messages travel on a tag no torch program uses (torch's tags are small user numbers).
constexpr int kMonitoredBarrierTag = (1 << 30) + 17;

}  // namespace

c10::intrusive_ptr<c10d::Work> DcommBackend::point_to_point(std::vector<at::Tensor>& tensors, int peer, int tag,
                                                            bool is_send) {
  const char* op = is_send ? "send" : "recv";
  TORCH_CHECK(tensors.size() == 1, "dcomm: ", op, " takes one tensor, got ", tensors.size());
  check_tensor(tensors[0], op);
  TORCH_CHECK(tag >= 0 && tag < kMonitoredBarrierTag, "dcomm: ", op, " tag ", tag, " must be in 0..",
              kMonitoredBarrierTag - 1);
  if (peer != dcomm::kAnySource) {
    TORCH_CHECK(peer >= 0 && peer < size_, "dcomm: ", op, ": peer ", peer, " is not a rank of this group of ", size_);
  }
  at::Tensor t = tensors[0], s = staged(t);
  // Point-to-point is always asynchronous here: torch programs post isend/irecv pairs in either order.
  dcomm::P2POptions o;
  o.async_op = true;
  o.stream = current_stream(t);
  dcomm::WorkPtr w = is_send ? pg_->send(buffer_of(s), peer, tag, o) : pg_->recv(buffer_of(s), peer, tag, o);
  std::function<void()> finish;
  if (!is_send) {
    // dcomm accepts a message shorter than the receive buffer (its size is the Work's bytes()); torch's recv
    // means "a tensor of this size", and gloo fails on any other. A silent partial receive would leave the tail
    // as it was, so a shorter message fails here, on the receiver, naming both sizes. (A longer one never gets
    // this far: dcomm fails it as not fitting.)
    finish = [s, t, w, peer, tag, rank = rank_] {
      const auto got = w->bytes(), want = static_cast<std::size_t>(s.nbytes());
      TORCH_CHECK(got == want, "dcomm: recv on rank ", rank, " from rank ", w->source(),
                  peer == dcomm::kAnySource ? " (any source)" : "", " tag ", tag, ": the message holds ", got,
                  " bytes but the ", t.scalar_type(), " tensor of ", t.numel(), " elements holds ", want,
                  "; torch's recv takes a tensor of exactly the message's size (send and recv disagree on it)");
      copy_back(s, t);
    };
  }
  return make_work(is_send ? c10d::OpType::SEND : (peer == dcomm::kAnySource ? c10d::OpType::RECVANYSOURCE
                                                                                : c10d::OpType::RECV),
                   {w}, std::move(finish), tensors);
}

c10::intrusive_ptr<c10d::Work> DcommBackend::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  return point_to_point(tensors, dst, tag, true);
}

c10::intrusive_ptr<c10d::Work> DcommBackend::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  return point_to_point(tensors, src, tag, false);
}

c10::intrusive_ptr<c10d::Work> DcommBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return point_to_point(tensors, dcomm::kAnySource, tag, false);
}

// Rank 0 waits for a message from every other rank, then answers each; a rank that does not arrive within the
// timeout is named (the first one, or all of them with wait_all_ranks), as gloo's monitoredBarrier does.
void DcommBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  const auto timeout = opts.timeout == c10d::kUnsetTimeout ? pg_->timeout() : dcomm::Duration(opts.timeout.count());
  uint8_t token = 1;
  dcomm::P2POptions o;
  o.timeout = timeout;
  o.async_op = true;
  if (rank_ != 0) {
    uint8_t ack = 0;
    pg_->send(dcomm::Buffer(&token, 1), 0, kMonitoredBarrierTag, o)->wait();
    try {
      pg_->recv(dcomm::Buffer(&ack, 1), 0, kMonitoredBarrierTag, o)->wait();
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "Rank ", rank_, " successfully reached monitoredBarrier, but received errors while waiting "
                  "for send/recv from rank 0 (rank 0 reports the rank that did not arrive; dcomm: ", e.what(), ")");
    }
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<uint8_t> got(static_cast<std::size_t>(size_), 0);
  std::vector<dcomm::WorkPtr> recvs(static_cast<std::size_t>(size_));
  for (int r = 1; r < size_; ++r) {
    recvs[static_cast<std::size_t>(r)] = pg_->recv(dcomm::Buffer(&got[static_cast<std::size_t>(r)], 1), r,
                                                   kMonitoredBarrierTag, o);
  }
  std::vector<int> missing;
  std::string first_cause;
  for (int r = 1; r < size_; ++r) {
    auto remaining = timeout - std::chrono::duration_cast<dcomm::Duration>(std::chrono::steady_clock::now() - start);
    if (remaining <= dcomm::Duration(0) && !wait_all_ranks) {
      // Rank 0's own time ran out before it could wait for rank r (gloo's words).
      for (auto& w : recvs) {
        if (w) w->abort();
      }
      TORCH_CHECK(false, "Rank 0 timed out in monitoredBarrier after ", timeout.count(), " ms; ranks 1 to ", r - 1,
                  " had arrived, rank ", r, " was not waited for");
    }
    try {
      recvs[static_cast<std::size_t>(r)]->wait(std::max(remaining, dcomm::Duration(1)));
    } catch (const std::exception& e) {
      recvs[static_cast<std::size_t>(r)]->abort();
      missing.push_back(r);
      if (first_cause.empty()) first_cause = e.what();
      if (!wait_all_ranks) break;
    }
  }
  if (!missing.empty()) {
    for (auto& w : recvs) {
      if (w) w->abort();
    }
    std::string names;
    for (int r : missing) names += (names.empty() ? "" : ", ") + std::to_string(r);
    TORCH_CHECK(false, "[Rank 0]: ", missing.size() == 1 ? "Rank " : "Ranks ", names,
                " failed to pass monitoredBarrier in ", timeout.count(), " ms (dcomm: ", first_cause, ")");
  }
  std::vector<dcomm::WorkPtr> acks;
  for (int r = 1; r < size_; ++r) acks.push_back(pg_->send(dcomm::Buffer(&token, 1), r, kMonitoredBarrierTag, o));
  dcomm::wait_all(acks);
}

}  // namespace dcomm_torch
