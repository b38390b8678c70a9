// Wiring every endpoint up before the first real message: each rank sends every peer an empty "hello" (a reserved
// tag) and receives one from each.
//
// ucp_ep_create only starts UCX's wire-up (address request, reply, ack over the auxiliary endpoint); until it
// finishes, the first sends wait in the wire-up endpoint's pending queue. If the peer dies in that window, UCX 1.13
// (Debian 12's) fails the endpoint from inside the pending dispatch and aborts the *surviving* process on its own
// assertion (wireup_ep.c: `wireup_ep->pending_count == 0`), a crash no error handler can catch (it hit
// ucx_mp_kill in CI once in ~60 runs on a loaded machine). A send completes only once its endpoint is wired up (until
// then it waits in that queue), and a peer's hello arrives only once the peer's endpoint is: when a rank has both,
// wire-up is over in both directions, and what a peer's later death meets is an ordinary endpoint, whose failure
// reaches the error handler. A peer dying during connect itself is still exposed; the window is setup, not traffic.
//
// Nothing here may need the peer's progress after the peer has returned from connect: it then waits on the store
// (Mesh::create's ready barrier) without driving UCX. A flush of the endpoints at the end did need it (the flush
// waits for the peer's acknowledgement) and hung one rank in ~10 runs until the mesh timeout; the hellos do not
// (the last hello a rank waits for was sent before its sender could return, and an eager send completes locally).
#include <fmt/format.h>

#include <dcomm/error.hpp>

#include "common/deadline.hpp"
#include "transports/ucx/ucx_endpoints.hpp"
#include "transports/ucx/ucx_tag.hpp"
#include "transports/ucx/ucx_worker.hpp"

namespace dcomm::transport::ucx {
namespace {

struct Step {
  int peer;
  const char* what;  // "hello to", "hello from"
  ucs_status_ptr_t request;
  ucs_status_t status = UCS_INPROGRESS;
};

ucs_status_t state(ucs_status_ptr_t r) {
  if (r == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(r)) return UCS_PTR_STATUS(r);
  return ucp_request_check_status(r);
}

}  // namespace

void UcxEndpoints::wire_up(const Deadline& deadline, const std::function<void()>& progress) {
  std::vector<Step> steps;
  auto finish = [&] {  // frees every request still held, whatever happened
    for (Step& s : steps) {
      if (s.request != nullptr && UCS_PTR_IS_PTR(s.request)) ucp_request_free(s.request);
      s.request = nullptr;
    }
  };
  auto drive = [&](const char* phase) {
    Backoff backoff;
    for (;;) {
      progress();
      bool all_done = true;
      for (Step& s : steps) {
        if (s.status == UCS_INPROGRESS) s.status = state(s.request);
        Peer* p = find(s.peer);
        std::string cause = s.status == UCS_INPROGRESS || s.status == UCS_OK ? failure(s.peer) : std::string();
        if (s.status != UCS_INPROGRESS && s.status != UCS_OK) cause = fmt::format("UCX reported {}", status_text(s.status));
        if (!cause.empty()) {
          finish();
          throw RemoteError(fmt::format(
              "ucx connect on rank {}: the {} {} failed during {} after {} (timeout {}): {}; the peer's process "
              "may have died during setup (its launcher's log says why), or the hosts do not share a UCX transport "
              "(UCX_TLS, UCX_NET_DEVICES; `ucx_info -d`)",
              self_.rank, s.what, p != nullptr ? name(s.peer) : fmt::format("rank {}", s.peer), phase,
              format_duration(deadline.elapsed()), format_duration(deadline.timeout()), cause));
        }
        all_done = all_done && s.status == UCS_OK;
      }
      if (all_done) break;
      if (deadline.expired()) {
        std::string late;
        for (const Step& s : steps) {
          if (s.status == UCS_INPROGRESS) late.append(late.empty() ? "" : ", ").append(fmt::format("{} rank {}", s.what, s.peer));
        }
        finish();
        throw TimeoutError(fmt::format(
            "ucx connect on rank {}: {} did not finish after {} (timeout {}): waiting for {}; those ranks may be "
            "stuck before connecting, or UCX cannot reach them (UCX_TLS, UCX_NET_DEVICES, a firewall)",
            self_.rank, phase, format_duration(deadline.elapsed()), format_duration(deadline.timeout()), late));
      }
      backoff.pause();
    }
    finish();
    steps.clear();
  };

  // The hellos: one empty receive per peer (its rank in the reserved tag), one empty send to each.
  for (const auto& peer : peers_) {
    if (!peer) continue;
    ucp_request_param_t recv{};
    steps.push_back({peer->info.rank, "hello from",
                     ucp_tag_recv_nbx(worker_, nullptr, 0, wireup_tag(peer->info.rank), kFullTagMask, &recv)});
    ucp_request_param_t send{};
    steps.push_back({peer->info.rank, "hello to", ucp_tag_send_nbx(peer->ep, nullptr, 0, wireup_tag(self_.rank), &send)});
  }
  drive("the endpoints' wire-up");
}

}  // namespace dcomm::transport::ucx
