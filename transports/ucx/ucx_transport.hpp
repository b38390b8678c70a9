#pragma once
// The ucx transport: dcomm's general fallback (it can reach any peer UCX can), over UCX's tag API.
//   send:    ucp_tag_send_nbx with the tag [source : 20][dcomm tag : 44]            (ucx_send.cpp)
//   arrive:  progress() probes with a full wildcard, taking messages out of UCX's    (ucx_receive.cpp)
//            unexpected queue in arrival order, and announces each with its message handle as the token
//   receive: ucp_tag_msg_recv_nbx pulls a probed message into the destination; discard() receives it into a
//            datatype that drops the bytes
//   failure: endpoints in peer-error mode record UCX's status and fail the ops to that peer (ucx_endpoints.cpp)
//   memory:  host always; CUDA device buffers too when UCX reports UCS_MEMORY_TYPE_CUDA among its context's memory
//            types (a UCX built with CUDA), passed with a memory-type hint so UCX need not detect it per call

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "transports/registry.hpp"
#include "transports/transport.hpp"
#include "transports/ucx/ucx_endpoints.hpp"
#include "transports/ucx/ucx_requests.hpp"
#include "transports/ucx/ucx_worker.hpp"

namespace dcomm::transport::ucx {

class UcxTransport final : public Transport {
 public:
  explicit UcxTransport(const TransportContext& ctx);
  ~UcxTransport() override { close(); }

  const char* name() const override { return "ucx"; }
  void publish(Store& store) override;
  bool can_connect(const PeerInfo&, const PeerInfo&) const override { return true; }
  /// Host memory always; CUDA memory when UCX reports it can move it (ucp_context_query at construction).
  bool supports_device(const Device& d) const override { return d.is_host() || cuda_memory_; }
  void connect(Store& store, const std::vector<PeerInfo>& peers, const Deadline& deadline) override;
  void isend(int peer, uint64_t tag, const void* data, std::size_t bytes, const Device& device, OpPtr op) override;
  bool progress(ArrivalSink& sink) override;
  void receive(const Incoming& msg, void* dst, const Device& device, OpPtr op) override;
  void discard(const Incoming& msg) override;
  std::string peer_failure(int peer) override;
  void close() noexcept override;
  void abandon() noexcept override { abandoned_ = true; }

 private:
  std::string who() const;
  void check_open(const char* call) const;
  void start_receive(const Incoming& msg, void* dst, ucp_datatype_t datatype, const Device& device, OpPtr op);
  /// Why `device` cannot be used with this transport ("" when it can): names the memory types UCX reported.
  std::string refuse_device(const Device& device) const;
  /// Sets the memory-type hint of `param` for a device buffer (host buffers keep UCX's own detection).
  static void hint_memory_type(ucp_request_param_t& param, const Device& device);
  /// Takes an announced message's handle out of announced_; rejects tokens this transport never announced.
  void claim(const Incoming& msg, const char* call);

  TransportContext ctx_;
  // Declared in this order so that destruction (if close() was never reached) releases requests last: UCX may
  // still complete requests while the worker is destroyed.
  std::unique_ptr<UcxRequests> requests_;
  std::unique_ptr<UcxWorker> worker_;
  std::unique_ptr<UcxEndpoints> endpoints_;
  bool cuda_memory_ = false;   // UCX reported UCS_MEMORY_TYPE_CUDA
  uint64_t memory_types_ = 0;  // what it reported, for error messages
  // Messages announced to the sink and not yet received or discarded. UCX keeps a probed message until it is
  // received, so close() discards these, and receive() refuses a token twice instead of handing UCX a stale handle.
  std::unordered_map<uint64_t, Incoming> announced_;  // by token
  bool abandoned_ = false;  // the world failed: close() flushes nothing
};

}  // namespace dcomm::transport::ucx
