#include "transports/ucx/ucx_endpoints.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <dcomm/error.hpp>

#include "common/log.hpp"
#include "common/process.hpp"
#include "transports/ucx/ucx_worker.hpp"

namespace dcomm::transport::ucx {

UcxEndpoints::UcxEndpoints(ucp_worker_h worker, const PeerInfo& self, int world_size,
                           std::function<void(int, const std::string&)> on_failure)
    : worker_(worker), self_(self), on_failure_(std::move(on_failure)) {
  peers_.resize(static_cast<std::size_t>(world_size));
}

UcxEndpoints::~UcxEndpoints() = default;

void UcxEndpoints::connect(Store& store, const std::vector<PeerInfo>& peers, const Deadline& deadline) {
  std::vector<std::string> keys;
  for (const PeerInfo& p : peers) {
    if (p.rank < 0 || p.rank >= static_cast<int>(peers_.size()) || p.rank == self_.rank) {
      throw InvalidUsageError(
          fmt::format("ucx connect on rank {}: peer rank {} is outside the world of {} or is "
                      "this rank",
                      self_.rank, p.rank, peers_.size()));
    }
    keys.push_back(address_key(p.rank));
  }
  if (keys.empty()) return;
  // The store names the missing keys (so the ranks that never published) when this runs out.
  store.wait(keys, deadline.remaining());
  std::vector<Store::Bytes> addresses = store.multi_get(keys);

  for (std::size_t i = 0; i < peers.size(); ++i) {
    auto peer = std::make_unique<Peer>();
    peer->owner = this;
    peer->info = peers[i];
    ucp_ep_params_t params{};
    params.field_mask =
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(addresses[i].data());
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &UcxEndpoints::on_error;
    params.err_handler.arg = peer.get();
    ucs_status_t st = ucp_ep_create(worker_, &params, &peer->ep);
    if (st != UCS_OK) {
      throw RemoteError(
          fmt::format("ucx connect on rank {}: creating the endpoint to rank {} on host {} failed: "
                      "UCX reported {}; check that both hosts share a UCX transport (UCX_TLS, "
                      "UCX_NET_DEVICES; `ucx_info -d`)",
                      self_.rank, peers[i].rank, peers[i].hostname, status_text(st)));
    }
    peers_[static_cast<std::size_t>(peers[i].rank)] = std::move(peer);
  }
}

UcxEndpoints::Peer* UcxEndpoints::find(int peer) const {
  if (peer < 0 || peer >= static_cast<int>(peers_.size())) return nullptr;
  return peers_[static_cast<std::size_t>(peer)].get();
}

ucp_ep_h UcxEndpoints::ep(int peer) const {
  Peer* p = find(peer);
  return p != nullptr ? p->ep : nullptr;
}

const std::string& UcxEndpoints::cause(int peer) const {
  static const std::string kNone;
  Peer* p = find(peer);
  return p != nullptr ? p->cause : kNone;
}

std::string UcxEndpoints::name(int peer) const {
  Peer* p = find(peer);
  if (p == nullptr || p->info.hostname.empty()) return fmt::format("rank {}", peer);
  return fmt::format("rank {} on host {} (pid {})", peer, p->info.hostname, p->info.pid);
}

std::string UcxEndpoints::failure(int peer) {
  Peer* p = find(peer);
  if (p == nullptr) return {};
  if (p->cause.empty() && !self_.host_id.empty() && p->info.host_id == self_.host_id) {
    if (local_process_state(p->info.pid) == ProcessState::kExited) {
      mark_failed(*p, fmt::format("its process (pid {}) has exited", p->info.pid));
    }
  }
  if (p->cause.empty()) return {};
  return fmt::format("{}: {}", name(peer), p->cause);
}

void UcxEndpoints::mark_failed(Peer& peer, std::string cause) {
  if (!peer.cause.empty()) return;  // keep the first cause
  peer.cause = std::move(cause);
  DCOMM_DEBUG("ucx: {} is unreachable: {}", name(peer.info.rank), peer.cause);
  on_failure_(peer.info.rank, peer.cause);
}

void UcxEndpoints::on_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<Peer*>(arg);
  peer->owner->mark_failed(*peer, fmt::format("UCX reported {} on the endpoint", status_text(status)));
}

namespace {

// Drives `progress` until every request in `reqs` has finished or `deadline` passes; frees the finished ones and
// returns the peers whose requests did not finish (their requests freed too: UCX releases them on completion).
template <typename Key>
std::vector<Key> drive(std::vector<std::pair<Key, ucs_status_ptr_t>> reqs, const Deadline& deadline,
                       const std::function<void()>& progress, std::vector<Key>* failed) {
  Backoff backoff;
  while (!reqs.empty() && !deadline.expired()) {
    progress();
    std::erase_if(reqs, [&](const auto& kr) {
      ucs_status_t st = ucp_request_check_status(kr.second);
      if (st == UCS_INPROGRESS) return false;
      if (st != UCS_OK && failed != nullptr) failed->push_back(kr.first);
      ucp_request_free(kr.second);
      return true;
    });
    backoff.pause();
  }
  std::vector<Key> unfinished;
  for (auto& [key, r] : reqs) {
    unfinished.push_back(key);
    ucp_request_free(r);
  }
  return unfinished;
}

// After `deadline`, force-closed endpoints still get this long to release their requests (they need no peer).
constexpr Duration kForceCloseBudget = std::chrono::seconds(1);

}  // namespace

void UcxEndpoints::close(const Deadline& deadline, const std::function<void()>& progress) noexcept {
  // First flush: what this rank sent reaches its peers (eager sends complete before delivery). A flush that a
  // peer cannot finish (it stopped progressing, or it never pulls a rendezvous send) is cut off at the deadline.
  std::vector<std::pair<Peer*, ucs_status_ptr_t>> flushing;
  std::vector<Peer*> unflushed;
  for (auto& peer : peers_) {
    if (!peer || peer->ep == nullptr || !peer->cause.empty()) continue;
    ucp_request_param_t param{};
    ucs_status_ptr_t r = ucp_ep_flush_nbx(peer->ep, &param);
    if (UCS_PTR_IS_PTR(r)) {
      flushing.emplace_back(peer.get(), r);
    } else if (UCS_PTR_STATUS(r) != UCS_OK) {
      unflushed.push_back(peer.get());
    }
  }
  std::vector<Peer*> late = drive(std::move(flushing), deadline, progress, &unflushed);
  if (!late.empty() || !unflushed.empty()) {
    DCOMM_DEBUG("ucx: {} endpoint(s) could not be flushed before close; their requests in flight are cancelled",
                late.size() + unflushed.size());
  }
  // Then close every endpoint with UCP_EP_CLOSE_FLAG_FORCE: after the flush nothing of ours is left to deliver,
  // and forcing never waits on the peer, so close cannot hang and no request outlives its endpoint (the worker
  // may only be destroyed once its endpoints hold no requests).
  std::vector<std::pair<int, ucs_status_ptr_t>> closing;
  for (auto& peer : peers_) {
    if (!peer || peer->ep == nullptr) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t r = ucp_ep_close_nbx(peer->ep, &param);
    peer->ep = nullptr;
    if (UCS_PTR_IS_PTR(r)) closing.emplace_back(peer->info.rank, r);
  }
  std::vector<int> stuck = drive<int>(std::move(closing), Deadline::after(kForceCloseBudget), progress, nullptr);
  if (!stuck.empty()) DCOMM_WARN("ucx: {} endpoint(s) did not finish closing; the worker releases them", stuck.size());
}

}  // namespace dcomm::transport::ucx
