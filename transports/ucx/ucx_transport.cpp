#include "transports/ucx/ucx_transport.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <dcomm/error.hpp>

#include "common/log.hpp"
#include "transports/ucx/ucx_tag.hpp"

namespace dcomm::transport::ucx {
namespace {

// close() gives healthy endpoints this long to flush; a peer that stopped progressing cannot make it hang.
constexpr Duration kCloseBudget = std::chrono::seconds(2);

}  // namespace

UcxTransport::UcxTransport(const TransportContext& ctx) : ctx_(ctx) {
  if (ctx.world_size > kMaxWorldSize) {
    throw InvalidUsageError(
        fmt::format("ucx transport: a world of {} ranks does not fit the {} source bits of the "
                    "UCX tag (at most {} ranks)",
                    ctx.world_size, kSourceBits, kMaxWorldSize));
  }
  worker_ = std::make_unique<UcxWorker>(who());
  memory_types_ = worker_->memory_types();
  cuda_memory_ = worker_->supports(UCS_MEMORY_TYPE_CUDA);
  endpoints_ =
      std::make_unique<UcxEndpoints>(worker_->get(), ctx.self, ctx.world_size,
                                     [this](int peer, const std::string& cause) { requests_->fail_peer(peer, cause); });
  requests_ = std::make_unique<UcxRequests>([this](int peer) { return endpoints_->name(peer); });
}

std::string UcxTransport::who() const { return fmt::format("rank {}/{}", ctx_.self.rank, ctx_.world_size); }

void UcxTransport::check_open(const char* call) const {
  if (!worker_) throw InvalidUsageError(fmt::format("ucx {} on {}: the transport is closed", call, who()));
}

std::string UcxTransport::refuse_device(const Device& device) const {
  if (supports_device(device)) return {};
  return fmt::format("UCX reports memory types {} but not cuda, so the ucx transport moves host memory only (a UCX "
                     "built with CUDA lists cuda_copy in `ucx_info -d`)", memory_type_names(memory_types_));
}

void UcxTransport::hint_memory_type(ucp_request_param_t& param, const Device& device) {
  if (device.is_host()) return;
  param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  param.memory_type = UCS_MEMORY_TYPE_CUDA;
}

void UcxTransport::publish(Store& store) {
  check_open("publish");
  store.set(UcxEndpoints::address_key(ctx_.self.rank), worker_->address());
}

void UcxTransport::connect(Store& store, const std::vector<PeerInfo>& peers, const Deadline& deadline) {
  check_open("connect");
  // A peer that died before publishing its address is named as soon as it is recorded (by dcomm-run).
  std::vector<std::string> keys;
  for (const PeerInfo& p : peers) keys.push_back(UcxEndpoints::address_key(p.rank));
  if (!keys.empty()) {
    rdzv::wait_watching_failures(store, keys, deadline, ctx_.failures, fmt::format("ucx connect {}", who()));
  }
  endpoints_->connect(store, peers, deadline);
  endpoints_->wire_up(deadline, [this] { worker_->progress(); });
  DCOMM_DEBUG("ucx: {} connected to {} peer(s)", who(), peers.size());
}

std::string UcxTransport::peer_failure(int peer) {
  if (!endpoints_) return {};
  return endpoints_->failure(peer);
}

void UcxTransport::close() noexcept {
  if (!worker_) return;
  // After a failure nothing needs delivering: no flush, so a stopped peer cannot delay the error's report.
  Deadline deadline = Deadline::after(abandoned_ ? Duration(0) : std::min(ctx_.timeout, kCloseBudget));
  // Messages announced but never taken are dropped, so UCX gets its buffers back and their senders complete.
  try {
    for (const auto& [token, msg] : announced_) start_receive(msg, nullptr, worker_->drop_datatype(), Device::host(), nullptr);
  } catch (const std::exception& e) {  // only allocation can fail here; the worker's destruction frees the rest
    DCOMM_DEBUG("ucx: dropping unreceived messages at close: {}", e.what());
  }
  announced_.clear();
  requests_->begin_close();
  endpoints_->close(deadline, [this] { worker_->progress(); });
  requests_->abandon();
  worker_.reset();  // UCX may complete leftover requests here; their records are still alive
  endpoints_.reset();
  requests_.reset();
}

}  // namespace dcomm::transport::ucx

namespace dcomm::transport {

std::unique_ptr<Transport> make_ucx_transport(const TransportContext& ctx) {
  return std::make_unique<ucx::UcxTransport>(ctx);
}

}  // namespace dcomm::transport
