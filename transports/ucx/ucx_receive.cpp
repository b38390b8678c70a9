// The receive path: probe, then receive. progress() drives the worker and then takes every message UCX has
// matched so far out of its unexpected queue with a full-wildcard probe (tag 0, mask 0, remove). A wildcard probe
// walks UCX's queue of all unexpected messages in arrival order, and UCX delivers one sender's messages in the
// order they were sent, so headers reach the sink in send order per peer, as the interface requires. Each
// message stays inside UCX (eager data in its buffers, rendezvous data still at the sender) until receive() or
// discard() passes its handle to ucp_tag_msg_recv_nbx.
#include <fmt/format.h>

#include <dcomm/error.hpp>

#include "transports/ucx/ucx_tag.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace dcomm::transport::ucx {
namespace {

// Bounds the worker-progress burst of one progress() call so one call cannot starve the caller's other work.
constexpr int kProgressBurst = 64;

}  // namespace

bool UcxTransport::progress(ArrivalSink& sink) {
  check_open("progress");
  bool any = false;
  for (int i = 0; i < kProgressBurst && worker_->progress() != 0; ++i) any = true;
  ucp_tag_recv_info_t info{};
  while (ucp_tag_message_h msg = ucp_tag_probe_nb(worker_->get(), 0, 0, 1, &info)) {
    any = true;
    Incoming in;
    in.source = tag_source(info.sender_tag);
    in.tag = tag_value(info.sender_tag);
    in.bytes = info.length;
    in.token = reinterpret_cast<uint64_t>(msg);
    announced_.emplace(in.token, in);
    sink.arrived(*this, in);
  }
  return any;
}

void UcxTransport::start_receive(const Incoming& msg, void* dst, ucp_datatype_t datatype, const Device& device,
                                 OpPtr op) {
  const Pending::Kind kind = op ? Pending::Kind::kReceive : Pending::Kind::kDiscard;
  Pending* p = requests_->add(kind, msg.source, msg.tag, msg.bytes, std::move(op));
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE;
  param.cb.recv = &UcxRequests::on_receive;
  param.user_data = p;
  param.datatype = datatype;
  hint_memory_type(param, device);
  auto* handle = reinterpret_cast<ucp_tag_message_h>(msg.token);
  requests_->started(p, ucp_tag_msg_recv_nbx(worker_->get(), dst, msg.bytes, handle, &param));
}

void UcxTransport::claim(const Incoming& msg, const char* call) {
  if (announced_.erase(msg.token) == 0) {
    throw InvalidUsageError(
        fmt::format("ucx {} on {} from rank {} ({}, tag {:#x}): the message was not announced "
                    "by this transport, or was already received or discarded",
                    call, who(), msg.source, format_bytes(msg.bytes), msg.tag));
  }
}

void UcxTransport::receive(const Incoming& msg, void* dst, const Device& device, OpPtr op) {
  check_open("receive");
  const std::string bad_device = refuse_device(device);
  if (!bad_device.empty() || (dst == nullptr && msg.bytes > 0) || !op) {
    throw InvalidUsageError(fmt::format("ucx receive on {} from rank {} ({}, tag {:#x}, {}): {}", who(), msg.source,
                                        format_bytes(msg.bytes), msg.tag, to_string(device),
                                        !bad_device.empty() ? bad_device
                                        : !op               ? "no op to complete"
                                                            : "null buffer"));
  }
  claim(msg, "receive");
  start_receive(msg, dst, ucp_dt_make_contig(1), device, std::move(op));
}

void UcxTransport::discard(const Incoming& msg) {
  check_open("discard");
  claim(msg, "discard");
  // The drop datatype accepts the bytes and keeps none; the sender's op completes as for any receive.
  start_receive(msg, nullptr, worker_->drop_datatype(), Device::host(), nullptr);
}

}  // namespace dcomm::transport::ucx
