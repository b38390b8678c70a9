// The send path: one ucp_tag_send_nbx per message, whatever its size (UCX picks eager or rendezvous itself), with
// the count in bytes as a size_t so multi-GiB messages need no splitting.
#include <fmt/format.h>

#include <dcomm/error.hpp>

#include "transports/ucx/ucx_tag.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace dcomm::transport::ucx {

void UcxTransport::isend(int peer, uint64_t tag, const void* data, std::size_t bytes, const Device& device, OpPtr op) {
  check_open("isend");
  ucp_ep_h ep = endpoints_->ep(peer);
  const std::string bad_device = refuse_device(device);
  if (ep == nullptr || tag > kMaxTag || !bad_device.empty() || (data == nullptr && bytes > 0)) {
    throw InvalidUsageError(fmt::format("ucx isend on {} to rank {} ({}, tag {:#x}, {}): {}", who(), peer,
                                        format_bytes(bytes), tag, to_string(device),
                                        ep == nullptr         ? "no ucx endpoint to that rank (not connected over ucx)"
                                        : tag > kMaxTag       ? fmt::format("the tag exceeds {} bits", kTagBits)
                                        : !bad_device.empty() ? bad_device
                                                              : "null buffer"));
  }
  if (const std::string& cause = endpoints_->cause(peer); !cause.empty()) {
    // The peer is known to be unreachable: fail fast with the first cause rather than queue on a dead endpoint.
    requests_->reject(Pending::Kind::kSend, peer, tag, bytes, op, cause);
    return;
  }
  Pending* p = requests_->add(Pending::Kind::kSend, peer, tag, bytes, op);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE;
  param.cb.send = &UcxRequests::on_send;
  param.user_data = p;
  param.datatype = ucp_dt_make_contig(1);
  hint_memory_type(param, device);
  requests_->started(p, ucp_tag_send_nbx(ep, data, bytes, pack_tag(ctx_.self.rank, tag), &param));
}

}  // namespace dcomm::transport::ucx
