// The loopback transport: ranks that are threads of one process. A send appends to the receiver's inbox;
// messages up to DCOMM_LOOPBACK_EAGER_BYTES (default 16 KiB) are copied there and complete at once, larger ones
// are copied once, by the receiver, straight from the sender's buffer into the receive buffer, and the sender's
// op completes then.
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <map>

#include <dcomm/error.hpp>

#include "common/env.hpp"
#include "transports/loopback/loopback_world.hpp"
#include "transports/registry.hpp"

namespace dcomm::transport::loopback {
namespace {

constexpr long long kDefaultEagerBytes = 16 << 10;

class LoopbackTransport final : public Transport {
 public:
  explicit LoopbackTransport(const TransportContext& ctx)
      : ctx_(ctx),
        eager_bytes_(static_cast<std::size_t>(env::get_int("DCOMM_LOOPBACK_EAGER_BYTES", kDefaultEagerBytes))),
        me_(register_endpoint(ctx.world_id, ctx.self.rank)),
        peers_(static_cast<std::size_t>(ctx.world_size)) {}
  ~LoopbackTransport() override { close(); }

  const char* name() const override { return "loopback"; }
  void publish(Store&) override {}
  bool can_connect(const PeerInfo& self, const PeerInfo& peer) const override {
    return self.host_id == peer.host_id && self.pid == peer.pid;
  }
  void connect(Store& store, const std::vector<PeerInfo>& peers, const Deadline& deadline) override;
  void isend(int peer, uint64_t tag, const void* data, std::size_t bytes, const Device& device, OpPtr op) override;
  bool progress(ArrivalSink& sink) override;
  void receive(const Incoming& msg, void* dst, const Device& device, OpPtr op) override;
  void discard(const Incoming& msg) override;
  std::string peer_failure(int peer) override;
  void close() noexcept override;

 private:
  std::exception_ptr closed_error(int who, std::size_t bytes) const {
    return std::make_exception_ptr(RemoteError(fmt::format(
        "loopback: rank {} closed its transport before taking a message of {} from rank {}; its thread ended or "
        "failed - check its log",
        who, format_bytes(bytes), ctx_.self.rank)));
  }

  TransportContext ctx_;
  std::size_t eager_bytes_;
  std::shared_ptr<Endpoint> me_;
  std::vector<std::shared_ptr<Endpoint>> peers_;
  std::map<uint64_t, Message> held_;  ///< announced, waiting for receive() or discard()
  uint64_t next_token_ = 1;
  bool closed_ = false;
};

void LoopbackTransport::connect(Store& /*store*/, const std::vector<PeerInfo>& peers, const Deadline& deadline) {
  // Every rank registers in its constructor, before it publishes its peer record, so a peer we are told to
  // connect to is normally registered already; the bounded loop covers a peer that is not in this process.
  Backoff backoff;
  for (const auto& p : peers) {
    while (!(peers_[static_cast<std::size_t>(p.rank)] = find_endpoint(ctx_.world_id, p.rank))) {
      if (deadline.expired()) {
        throw TimeoutError(fmt::format(
            "loopback rank {}: rank {} of world {} did not register in this process within {}; loopback connects "
            "only ranks that are threads of one process",
            ctx_.self.rank, p.rank, ctx_.world_id, format_duration(deadline.timeout())));
      }
      backoff.pause();
    }
  }
}

void LoopbackTransport::isend(int peer, uint64_t tag, const void* data, std::size_t bytes, const Device& /*device*/,
                              OpPtr op) {
  Endpoint& to = *peers_[static_cast<std::size_t>(peer)];
  Message m;
  m.source = ctx_.self.rank;
  m.tag = tag;
  m.bytes = bytes;
  bool eager = bytes <= eager_bytes_;
  if (eager) {
    m.eager.assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
  } else {
    m.src = data;
    m.send_op = op;
  }
  {
    std::lock_guard<std::mutex> lock(to.mu);
    if (to.closed) {
      op->fail(closed_error(peer, bytes));
      return;
    }
    to.inbox.push_back(std::move(m));
  }
  if (eager) op->complete(bytes);
}

bool LoopbackTransport::progress(ArrivalSink& sink) {
  std::deque<Message> batch;
  {
    std::lock_guard<std::mutex> lock(me_->mu);
    batch.swap(me_->inbox);
  }
  for (auto& m : batch) {
    uint64_t token = next_token_++;
    Incoming in{m.source, m.tag, m.bytes, token};
    held_.emplace(token, std::move(m));
    sink.arrived(*this, in);
  }
  return !batch.empty();
}

void LoopbackTransport::receive(const Incoming& msg, void* dst, const Device& /*device*/, OpPtr op) {
  auto it = held_.find(msg.token);
  if (it == held_.end()) {
    op->fail(std::make_exception_ptr(Error(ErrorCode::kInternal, "loopback: receive of an unknown message")));
    return;
  }
  Message& m = it->second;
  if (m.bytes > 0) std::memcpy(dst, m.send_op ? m.src : m.eager.data(), m.bytes);
  if (m.send_op) m.send_op->complete(m.bytes);
  op->complete(m.bytes);
  held_.erase(it);
}

void LoopbackTransport::discard(const Incoming& msg) {
  auto it = held_.find(msg.token);
  if (it == held_.end()) return;
  if (it->second.send_op) it->second.send_op->complete(it->second.bytes);
  held_.erase(it);
}

std::string LoopbackTransport::peer_failure(int peer) {
  const auto& ep = peers_[static_cast<std::size_t>(peer)];
  if (!ep) return {};
  std::lock_guard<std::mutex> lock(ep->mu);
  if (!ep->closed) return {};
  return fmt::format("rank {} (a thread of process {}) closed its loopback transport", peer, ::getpid());
}

void LoopbackTransport::close() noexcept {
  if (closed_) return;
  closed_ = true;
  std::deque<Message> left;
  {
    std::lock_guard<std::mutex> lock(me_->mu);
    me_->closed = true;
    left.swap(me_->inbox);
  }
  // Senders of large messages wait on us; tell them we are gone rather than leave them to time out.
  for (auto& m : left) {
    if (m.send_op) m.send_op->fail(closed_error(ctx_.self.rank, m.bytes));
  }
  for (auto& [token, m] : held_) {
    if (m.send_op) m.send_op->fail(closed_error(ctx_.self.rank, m.bytes));
  }
  held_.clear();
  unregister_endpoint(ctx_.world_id, ctx_.self.rank);
}

}  // namespace

}  // namespace dcomm::transport::loopback

namespace dcomm::transport {
std::unique_ptr<Transport> make_loopback_transport(const TransportContext& ctx) {
  return std::make_unique<loopback::LoopbackTransport>(ctx);
}
}  // namespace dcomm::transport
