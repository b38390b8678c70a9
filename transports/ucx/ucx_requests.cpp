#include "transports/ucx/ucx_requests.hpp"

#include <fmt/format.h>

#include <dcomm/error.hpp>

#include "common/deadline.hpp"
#include "common/log.hpp"
#include "transports/ucx/ucx_worker.hpp"

namespace dcomm::transport::ucx {

UcxRequests::~UcxRequests() {
  // Only reached after the worker is gone (close()), so UCX can no longer call back into these records.
  live_.clear();
}

Pending* UcxRequests::add(Pending::Kind kind, int peer, uint64_t tag, std::size_t bytes, OpPtr op) {
  auto p = std::make_unique<Pending>();
  p->owner = this;
  p->kind = kind;
  p->peer = peer;
  p->tag = tag;
  p->bytes = bytes;
  p->op = std::move(op);
  Pending* raw = p.get();
  live_.emplace(raw, std::move(p));
  return raw;
}

void UcxRequests::started(Pending* p, ucs_status_ptr_t result) {
  p->started = true;
  if (p->early_done) {
    finish(p, p->early_status, p->early_bytes);
  } else if (UCS_PTR_IS_PTR(result)) {
    p->request = result;  // the callback finishes it
  } else {
    finish(p, UCS_PTR_STATUS(result), p->bytes);
  }
}

void UcxRequests::callback_done(void* request, Pending* p, ucs_status_t status, std::size_t bytes) noexcept {
  ucp_request_free(request);
  if (p->started) {
    p->owner->finish(p, status, bytes);
    return;
  }
  p->early_done = true;
  p->early_status = status;
  p->early_bytes = bytes;
}

void UcxRequests::on_send(void* request, ucs_status_t status, void* user_data) {
  auto* p = static_cast<Pending*>(user_data);
  callback_done(request, p, status, p->bytes);
}

void UcxRequests::on_receive(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
  auto* p = static_cast<Pending*>(user_data);
  callback_done(request, p, status, status == UCS_OK && info != nullptr ? info->length : p->bytes);
}

std::string UcxRequests::failure_text(const Pending& p, const std::string& cause) const {
  const char* what = p.kind == Pending::Kind::kSend ? "send to" : "receive from";
  return fmt::format("{} {} over ucx ({}, tag {:#x}) failed: {}; rank {} may have exited or become unreachable - "
                     "check its log",
                     what, name_peer_(p.peer), format_bytes(p.bytes), p.tag, cause, p.peer);
}

void UcxRequests::reject(Pending::Kind kind, int peer, uint64_t tag, std::size_t bytes, const OpPtr& op,
                         const std::string& cause) const {
  Pending p;
  p.kind = kind;
  p.peer = peer;
  p.tag = tag;
  p.bytes = bytes;
  op->fail(std::make_exception_ptr(RemoteError(failure_text(p, cause))));
}

void UcxRequests::finish(Pending* p, ucs_status_t status, std::size_t bytes) noexcept {
  auto node = live_.extract(p);  // owns the record until this returns
  if (p->op && !p->op->done()) {  // an endpoint failure may have failed it already
    if (status == UCS_OK) {
      p->op->complete(bytes);
    } else if (status == UCS_ERR_CANCELED || closing_) {
      p->op->fail(std::make_exception_ptr(AbortedError(aborted_text(*p))));
    } else {
      p->op->fail(std::make_exception_ptr(RemoteError(failure_text(*p, "UCX reported " + status_text(status)))));
    }
  } else if (!p->op && status != UCS_OK && status != UCS_ERR_CANCELED) {
    DCOMM_DEBUG("ucx: discarding a message from {} failed: {}", name_peer_(p->peer), status_text(status));
  }
}

void UcxRequests::fail_peer(int peer, const std::string& cause) {
  for (auto& [raw, p] : live_) {
    if (p->peer == peer && p->op && !p->op->done()) {
      p->op->fail(std::make_exception_ptr(RemoteError(failure_text(*p, cause))));
    }
  }
}

std::string UcxRequests::aborted_text(const Pending& p) const {
  return fmt::format("{} {} over ucx ({}, tag {:#x}) was aborted: the ucx transport was closed while it was in flight",
                     p.kind == Pending::Kind::kSend ? "send to" : "receive from", name_peer_(p.peer),
                     format_bytes(p.bytes), p.tag);
}

void UcxRequests::abandon() noexcept {
  for (auto& [raw, p] : live_) {
    if (p->op && !p->op->done()) p->op->fail(std::make_exception_ptr(AbortedError(aborted_text(*p))));
  }
}

}  // namespace dcomm::transport::ucx
