#include "transports/self_channel.hpp"

#include <cstring>
#include <utility>

#include <dcomm/error.hpp>

namespace dcomm::transport {

void SelfChannel::isend(int /*peer*/, uint64_t tag, const void* data, std::size_t bytes, const Device& /*device*/,
                        OpPtr op) {
  Message m;
  m.tag = tag;
  m.payload.resize(bytes);
  if (bytes > 0) std::memcpy(m.payload.data(), data, bytes);
  fresh_.emplace_back(next_token_++, std::move(m));
  op->complete(bytes);
}

bool SelfChannel::progress(ArrivalSink& sink) {
  if (fresh_.empty()) return false;
  // Move the batch aside first: the sink may call receive() or discard(), and a receive may be posted for a
  // message sent from inside the sink by a later caller; neither may see a half-updated list.
  auto batch = std::exchange(fresh_, {});
  for (auto& [token, msg] : batch) {
    Incoming in{rank_, msg.tag, msg.payload.size(), token};
    held_.emplace(token, std::move(msg));
    sink.arrived(*this, in);
  }
  return true;
}

void SelfChannel::receive(const Incoming& msg, void* dst, const Device& /*device*/, OpPtr op) {
  auto it = held_.find(msg.token);
  if (it == held_.end()) {
    op->fail(std::make_exception_ptr(Error(ErrorCode::kInternal, "self channel: receive of an unknown message")));
    return;
  }
  if (!it->second.payload.empty()) std::memcpy(dst, it->second.payload.data(), it->second.payload.size());
  op->complete(it->second.payload.size());
  held_.erase(it);
}

}  // namespace dcomm::transport
