#include "transports/mesh_impl.hpp"

#include <fmt/format.h>

#include "common/log.hpp"
#include "transports/placement.hpp"

namespace dcomm::transport {

std::exception_ptr make_error(ErrorCode code, const std::string& message) {
  switch (code) {
    case ErrorCode::kTimeout: return std::make_exception_ptr(TimeoutError(message));
    case ErrorCode::kInvalidUsage: return std::make_exception_ptr(InvalidUsageError(message));
    case ErrorCode::kRemoteError: return std::make_exception_ptr(RemoteError(message));
    case ErrorCode::kAborted: return std::make_exception_ptr(AbortedError(message));
    default: return std::make_exception_ptr(Error(code, message));
  }
}

MeshImpl::MeshImpl(std::vector<PeerInfo> peers, int rank, std::vector<std::unique_ptr<Transport>> transports,
                   std::vector<Transport*> route, const MeshOptions& options, std::vector<Transport*> device_route)
    : peers_(std::move(peers)),
      rank_(rank),
      transports_(std::move(transports)),
      route_(std::move(route)),
      device_route_(std::move(device_route)),
      options_(options),
      self_(rank) {
  for (const PeerInfo& p : peers_) {
    quick_answer_.push_back(!never_run_together(peers_[static_cast<std::size_t>(rank_)], p));
    const bool adapts = p.rank != rank_ && may_share_core(peers_[static_cast<std::size_t>(rank_)], p);
    quick_spins_.push_back(adapts ? std::make_unique<QuickSpins>() : nullptr);
  }
}

const PeerInfo& MeshImpl::peer(int rank) const {
  if (rank < 0 || rank >= size()) {
    throw InvalidUsageError(fmt::format("Mesh::peer: rank {} is outside the world of {}", rank, size()));
  }
  return peers_[static_cast<std::size_t>(rank)];
}

const char* MeshImpl::transport_name(int peer) const {
  if (peer == rank_) return self_.name();
  if (peer < 0 || peer >= size()) return "none";
  return route_[static_cast<std::size_t>(peer)]->name();
}

void MeshImpl::throw_if_poisoned() const {
  if (!failed_.load(std::memory_order_acquire)) return;
  std::rethrow_exception(poisoned());
}

void MeshImpl::check_args(const char* op, int peer, uint64_t tag, const void* data, std::size_t bytes,
                          const Device& device, bool any_source_ok) {
  const char* dir = op[0] == 's' ? "to" : "from";
  if (!(peer >= 0 && peer < size()) && !(any_source_ok && peer == kAnySource)) {
    throw InvalidUsageError(fmt::format("rank {}/{}: {} {} rank {}: no such rank (the world has ranks 0..{}{})",
                                        rank_, size(), op, dir, peer, size() - 1,
                                        any_source_ok ? ", or kAnySource" : ""));
  }
  if (tag > kMaxMeshTag) {
    throw InvalidUsageError(fmt::format("rank {}/{}: {} {} rank {}: tag {} exceeds the largest tag {}", rank_,
                                        size(), op, dir, peer, tag, kMaxMeshTag));
  }
  if (data == nullptr && bytes > 0) {
    throw InvalidUsageError(fmt::format("rank {}/{}: {} {} rank {}: null buffer for {}", rank_, size(), op, dir,
                                        peer, format_bytes(bytes)));
  }
  if (device.is_host()) return;
  for (int p = 0; p < size(); ++p) {
    if (p == rank_ || (peer != kAnySource && p != peer)) continue;
    if (!route(p, device)->supports_device(device)) {
      throw InvalidUsageError(fmt::format(
          "rank {}/{}: {} {} rank {}: {} memory cannot travel over {} (the transport to rank {}); use host memory "
          "or a transport that moves device memory (cuda_ipc)",
          rank_, size(), op, dir, peer, to_string(device), route(p, device)->name(), p));
    }
  }
  if (peer == rank_ || (peer == kAnySource && size() == 1)) {
    throw InvalidUsageError(fmt::format("rank {}/{}: {} {} rank {}: {} memory to or from this rank itself is not "
                                        "supported; use host memory",
                                        rank_, size(), op, dir, peer, to_string(device)));
  }
}

namespace {

void fill_request(Request& r, Request::Kind kind, int peer, uint64_t tag, void* data, std::size_t capacity,
                  const Device& device) {
  r.kind = kind;
  r.peer = peer;
  r.tag = tag;
  r.data = data;
  r.device = device;
  r.capacity = capacity;
}

}  // namespace

void MeshImpl::isend(const RequestPtr& r, int peer, uint64_t tag, const void* data, std::size_t bytes,
                     const Device& device) {
  throw_if_poisoned();
  check_args("send", peer, tag, data, bytes, device, false);
  // Sends keep their pointer in the transport, not in the request.
  fill_request(*r, Request::Kind::kSend, peer, tag, nullptr, bytes, device);
  r->source = rank_;
  std::lock_guard<std::mutex> lock(mu_);
  throw_if_poisoned();
  r->transport = route(peer, device);
  try {
    r->transport->isend(peer, tag, data, bytes, device, op_ptr(r));
  } catch (...) {
    poison(std::current_exception());
    throw;
  }
}

bool MeshImpl::send_now(int peer, uint64_t tag, const void* data, std::size_t bytes) {
  throw_if_poisoned();
  check_args("send", peer, tag, data, bytes, Device::host(), false);
  if (peer == rank_) return false;  // the self channel pairs it with a receive: isend
  std::lock_guard<std::mutex> lock(mu_);
  throw_if_poisoned();
  try {
    return route_[static_cast<std::size_t>(peer)]->send_now(peer, tag, data, bytes);
  } catch (...) {
    poison(std::current_exception());
    throw;
  }
}

void MeshImpl::irecv(const RequestPtr& r, int peer, uint64_t tag, void* data, std::size_t capacity,
                     const Device& device) {
  throw_if_poisoned();
  check_args("recv", peer, tag, data, capacity, device, true);
  fill_request(*r, Request::Kind::kRecv, peer, tag, data, capacity, device);
  std::lock_guard<std::mutex> lock(mu_);
  throw_if_poisoned();
  if (peer != kAnySource) r->transport = route(peer, device);
  if (auto u = matcher_.post(r)) deliver(r, *u->transport, u->msg);
}

void MeshImpl::arrived(Transport& from, const Incoming& msg) {
  if (RequestPtr r = matcher_.arrived(from, msg)) deliver(r, from, msg);
}

void MeshImpl::deliver(const RequestPtr& rp, Transport& from, const Incoming& msg) {
  Request& r = *rp;
  r.matched = true;
  r.source = msg.source;
  r.transport = &from;
  if (msg.bytes > r.capacity) {
    // The payload is dropped, never written: nothing lands past the caller's buffer. Only this receive fails;
    // the mesh stays usable, because both sides are intact and the mistake is the caller's.
    from.discard(msg);
    r.op->fail(std::make_exception_ptr(InvalidUsageError(fmt::format(
        "recv from rank {} tag {}: message of {} does not fit the {} buffer; post a receive at least as large as "
        "the matching send",
        msg.source, r.tag, format_bytes(msg.bytes), format_bytes(r.capacity)))));
    return;
  }
  if (!from.receives_into(r.device)) {
    // A host-only transport would write device memory with memcpy: refuse, as for a message that does not fit.
    from.discard(msg);
    r.op->fail(std::make_exception_ptr(InvalidUsageError(fmt::format(
        "recv from rank {} tag {}: the {} message came over {}, which cannot write into the receive buffer on {}; "
        "send from a buffer on the same kind of device, or receive into host memory",
        msg.source, r.tag, format_bytes(msg.bytes), from.name(), to_string(r.device)))));
    return;
  }
  r.received = msg.bytes;
  from.receive(msg, r.data, r.device, op_ptr(rp));
}

bool MeshImpl::progress_locked() {
  if (closed_) return false;
  bool moved = false;
  try {
    moved = self_.progress(*this);
    for (auto& t : transports_) moved = t->progress(*this) || moved;
  } catch (...) {
    poison(std::current_exception());
    throw;
  }
  return moved;
}

void MeshImpl::progress() {
  throw_if_poisoned();
  std::lock_guard<std::mutex> lock(mu_);
  progress_locked();
}

bool MeshImpl::test(Request& r) {
  if (r.cancelled || r.op->done()) return true;
  if (failed_.load(std::memory_order_acquire)) return true;
  // Another thread that holds the lock is progressing for everyone; do not queue behind it.
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (lock.owns_lock()) progress_locked();
  return r.cancelled || r.op->done();
}

bool MeshImpl::cancel(Request& r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (r.kind != Request::Kind::kRecv || r.matched) return false;
  if (r.cancelled) return true;
  if (!matcher_.withdraw(r)) return false;
  r.cancelled = true;
  return true;
}

void MeshImpl::poison(std::exception_ptr cause) noexcept {
  std::lock_guard<std::mutex> lock(poison_mu_);
  if (poison_) return;
  poison_ = cause;
  failed_.store(true, std::memory_order_release);
  try {
    std::rethrow_exception(cause);
  } catch (const std::exception& e) {
    DCOMM_WARN("rank {}/{}: mesh failed, later operations will fail at once: {}", rank_, size(), e.what());
  } catch (...) {
    DCOMM_WARN("rank {}/{}: mesh failed with a non-standard exception", rank_, size());
  }
}

std::exception_ptr MeshImpl::poisoned() const {
  // Asked on every collective call: a mesh that is fine answers without the lock.
  if (!failed_.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> lock(poison_mu_);
  return poison_;
}

void MeshImpl::close() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  closed_ = true;
  {
    std::lock_guard<std::mutex> plock(poison_mu_);
    if (poison_) {
      for (auto& t : transports_) t->abandon();
    } else {
      poison_ = std::make_exception_ptr(
          AbortedError(fmt::format("rank {}/{}: the mesh was closed (the process group was destroyed or aborted)",
                                   rank_, size())));
      failed_.store(true, std::memory_order_release);
    }
  }
  for (auto& r : matcher_.take_posted()) r->op->fail(poison_);
  for (auto& u : matcher_.take_unexpected()) {
    try {
      u.transport->discard(u.msg);
    } catch (const std::exception& e) {
      DCOMM_DEBUG("rank {}/{}: discarding a message at close failed: {}", rank_, size(), e.what());
    }
  }
  self_.close();
  for (auto& t : transports_) t->close();
}

}  // namespace dcomm::transport
