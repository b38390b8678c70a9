#pragma once
// The operations this rank has in flight in UCX (sends, receives of probed messages, discards), each tied to the
// Op that the layer above waits on. UCX completes a request through a callback inside ucp_worker_progress(); an
// endpoint failure fails the ops of that peer at once (UCX's own completion of those requests comes later and is
// then ignored), and close() fails whatever is left as aborted, so no Op is ever left pending by a closed transport.

#include <ucp/api/ucp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "transports/transport.hpp"

namespace dcomm::transport::ucx {

class UcxRequests;

/// One request in flight; its address is the user_data of the UCX call.
struct Pending {
  enum class Kind { kSend, kReceive, kDiscard };
  UcxRequests* owner = nullptr;
  Kind kind = Kind::kSend;
  int peer = -1;
  uint64_t tag = 0;
  std::size_t bytes = 0;
  OpPtr op;                 ///< null for discards: nobody waits for them
  void* request = nullptr;  ///< UCX's handle, once the call returned one
  // A callback that runs before the UCX call has returned (UCX may complete inline) parks its result here for
  // started(), so the record is never freed while the call that carries it is still on the stack.
  bool started = false;
  bool early_done = false;
  ucs_status_t early_status = UCS_OK;
  std::size_t early_bytes = 0;
};

class UcxRequests {
 public:
  /// `name_peer(r)` says "rank r on host h" for error messages.
  explicit UcxRequests(std::function<std::string(int)> name_peer) : name_peer_(std::move(name_peer)) {}
  ~UcxRequests();

  /// Registers a request before its UCX call, so the call can carry it as user_data.
  Pending* add(Pending::Kind kind, int peer, uint64_t tag, std::size_t bytes, OpPtr op);
  /// Takes the UCX call's result: done at once, failed at once, or in flight until a callback.
  void started(Pending* p, ucs_status_ptr_t result);
  /// Fails every op to or from `peer`; `cause` says why ("UCX reported Connection reset by remote peer").
  void fail_peer(int peer, const std::string& cause);
  /// Fails `op` at once, without a UCX call (its peer is already known to be unreachable).
  void reject(Pending::Kind kind, int peer, uint64_t tag, std::size_t bytes, const OpPtr& op,
              const std::string& cause) const;
  /// Close begins: from now on a request UCX fails (the endpoints' forced close fails whatever is still queued on
  /// them) fails its Op as aborted, not as a remote error.
  void begin_close() noexcept { closing_ = true; }
  /// Fails every Op still pending as aborted. Called once the endpoints are closed. Never throws.
  void abandon() noexcept;
  std::size_t in_flight() const { return live_.size(); }

  /// The UCX completion callbacks (user_data is the Pending).
  static void on_send(void* request, ucs_status_t status, void* user_data);
  static void on_receive(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data);

  /// The RemoteError text for a failed request.
  std::string failure_text(const Pending& p, const std::string& cause) const;

 private:
  /// From a callback: finishes `p` now, or parks the result when its UCX call has not returned yet.
  static void callback_done(void* request, Pending* p, ucs_status_t status, std::size_t bytes) noexcept;
  void finish(Pending* p, ucs_status_t status, std::size_t bytes) noexcept;

  std::string aborted_text(const Pending& p) const;

  std::function<std::string(int)> name_peer_;
  bool closing_ = false;
  std::unordered_map<Pending*, std::unique_ptr<Pending>> live_;
};

}  // namespace dcomm::transport::ucx
