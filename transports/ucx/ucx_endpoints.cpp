#include "transports/ucx/ucx_endpoints.hpp"

#include <fmt/format.h>

#include <dcomm/error.hpp>

#include "common/log.hpp"
#include "transports/ucx/ucx_worker.hpp"

namespace dcomm::transport::ucx {

UcxEndpoints::UcxEndpoints(ucp_worker_h worker, const PeerInfo& self, int world_size,
                           std::function<void(int, ucs_status_t)> on_failure)
    : worker_(worker), self_(self), on_failure_(std::move(on_failure)) {
  peers_.resize(static_cast<std::size_t>(world_size));
}

UcxEndpoints::~UcxEndpoints() = default;

void UcxEndpoints::connect(Store& store, const std::vector<PeerInfo>& peers, const Deadline& deadline) {
  std::vector<std::string> keys;
  for (const PeerInfo& p : peers) {
    if (p.rank < 0 || p.rank >= static_cast<int>(peers_.size()) || p.rank == self_.rank) {
      throw InvalidUsageError(fmt::format("ucx connect on rank {}: peer rank {} is outside the world of {} or is "
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
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(addresses[i].data());
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &UcxEndpoints::on_error;
    params.err_handler.arg = peer.get();
    ucs_status_t st = ucp_ep_create(worker_, &params, &peer->ep);
    if (st != UCS_OK) {
      throw RemoteError(fmt::format("ucx connect on rank {}: creating the endpoint to rank {} on host {} failed: "
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

ucs_status_t UcxEndpoints::status(int peer) const {
  Peer* p = find(peer);
  return p != nullptr ? p->status : UCS_OK;
}

std::string UcxEndpoints::name(int peer) const {
  Peer* p = find(peer);
  if (p == nullptr || p->info.hostname.empty()) return fmt::format("rank {}", peer);
  return fmt::format("rank {} on host {}", peer, p->info.hostname);
}

std::string UcxEndpoints::failure(int peer) const {
  ucs_status_t st = status(peer);
  if (st == UCS_OK) return {};
  return fmt::format("{}: UCX reported {} on the endpoint", name(peer), status_text(st));
}

void UcxEndpoints::on_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<Peer*>(arg);
  if (peer->status != UCS_OK) return;  // keep the first cause
  peer->status = status;
  DCOMM_DEBUG("ucx: endpoint to {} failed: {}", peer->owner->name(peer->info.rank), status_text(status));
  peer->owner->on_failure_(peer->info.rank, status);
}

void UcxEndpoints::close(const Deadline& deadline, const std::function<void()>& progress) noexcept {
  // Healthy endpoints flush what is still queued to their peers first; failed ones are released at once.
  std::vector<ucs_status_ptr_t> closing;
  for (auto& peer : peers_) {
    if (!peer || peer->ep == nullptr) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = peer->status != UCS_OK ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t r = ucp_ep_close_nbx(peer->ep, &param);
    peer->ep = nullptr;
    if (UCS_PTR_IS_PTR(r)) closing.push_back(r);
  }
  Backoff backoff;
  while (!closing.empty()) {
    progress();
    std::erase_if(closing, [](ucs_status_ptr_t r) {
      if (ucp_request_check_status(r) == UCS_INPROGRESS) return false;
      ucp_request_free(r);
      return true;
    });
    if (deadline.expired()) {
      // A peer that stopped progressing never acknowledges the flush; destroying the worker releases the rest.
      DCOMM_DEBUG("ucx: {} endpoint(s) still closing at the close deadline; releasing them with the worker",
                  closing.size());
      for (ucs_status_ptr_t r : closing) ucp_request_free(r);
      break;
    }
    backoff.pause();
  }
}

}  // namespace dcomm::transport::ucx
