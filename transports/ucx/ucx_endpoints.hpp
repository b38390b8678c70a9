#pragma once
// This rank's UCX endpoints, one per peer the ucx transport was chosen for, created from the worker addresses
// the peers published in the store ("addr/<rank>"). Every endpoint runs in UCP_ERR_HANDLING_MODE_PEER with an
// error callback that records UCX's status for peer_failure() and fails the ops in flight to that peer.
//
// UCX notices a dead peer at once over TCP (the kernel resets the connection), but over shared memory only by
// its keepalive (UCX_KEEPALIVE_INTERVAL, 20 s by default). So failure() also asks the kernel whether a peer on
// this host (equal host id) still runs, which is what makes a wait on a SIGKILLed neighbour fail within the
// Mesh's liveness interval whichever UCX transport carries the traffic.

#include <ucp/api/ucp.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <dcomm/store.hpp>

#include "common/deadline.hpp"
#include "transports/transport.hpp"

namespace dcomm::transport::ucx {

class UcxEndpoints {
 public:
  /// `on_failure(peer, cause)` runs once per peer when it is found unreachable: inside ucp_worker_progress when
  /// UCX reports the endpoint failed, or inside failure() when the peer's process is gone.
  UcxEndpoints(ucp_worker_h worker, const PeerInfo& self, int world_size,
               std::function<void(int, const std::string&)> on_failure);
  ~UcxEndpoints();
  UcxEndpoints(const UcxEndpoints&) = delete;
  UcxEndpoints& operator=(const UcxEndpoints&) = delete;

  static std::string address_key(int rank) { return "addr/" + std::to_string(rank); }

  /// Waits (bounded by `deadline`) for the peers' addresses and creates an endpoint to each.
  void connect(Store& store, const std::vector<PeerInfo>& peers, const Deadline& deadline);
  /// Finishes UCX's wire-up of every endpoint before any real traffic (ucx_wireup.cpp says why): an empty hello
  /// each way with every peer. Collective among the connected ranks; bounded by `deadline`; throws
  /// RemoteError naming the peer when one fails, TimeoutError naming the ranks that never answered.
  void wire_up(const Deadline& deadline, const std::function<void()>& progress);
  /// The endpoint to `peer`, or null when it was never connected.
  ucp_ep_h ep(int peer) const;
  /// Why `peer` is unreachable ("UCX reported Endpoint timeout"), or empty while it looks healthy. No syscall.
  const std::string& cause(int peer) const;
  /// "rank 3 on host b (pid 1234)" (or just "rank 3" before connect).
  std::string name(int peer) const;
  /// Why `peer` is unreachable, or empty: "rank r on host h (pid p): UCX reported <status> on the endpoint".
  /// Checks a same-host peer's process (one syscall) while UCX has reported nothing.
  std::string failure(int peer);
  /// Flushes healthy endpoints (bounded by `deadline`), then force-closes every endpoint, which cancels whatever
  /// is still in flight on it. Never throws.
  void close(const Deadline& deadline, const std::function<void()>& progress) noexcept;

 private:
  struct Peer {
    UcxEndpoints* owner = nullptr;
    PeerInfo info;
    ucp_ep_h ep = nullptr;
    std::string cause;  ///< the first reason it became unreachable
  };
  static void on_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  void mark_failed(Peer& peer, std::string cause);
  Peer* find(int peer) const;

  ucp_worker_h worker_;
  PeerInfo self_;
  std::function<void(int, const std::string&)> on_failure_;
  std::vector<std::unique_ptr<Peer>> peers_;  // indexed by rank; stable addresses for the error callback
};

}  // namespace dcomm::transport::ucx
