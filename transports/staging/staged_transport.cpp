#include "transports/staging/staged_transport.hpp"

#include <fmt/format.h>

#include <cstring>

#include <dcomm/error.hpp>

namespace dcomm::transport::staging {
namespace {

constexpr uint32_t kMagic = 0x47545344;  // "DSTG"
constexpr uint32_t kVersion = 1;

bool failed(const OpPtr& op) { return op->state() == Op::State::kFailed; }

}  // namespace

StagedTransport::StagedTransport(std::unique_ptr<Transport> inner, std::shared_ptr<Stager> stager)
    : inner_(std::move(inner)), stager_(std::move(stager)) {}

std::exception_ptr StagedTransport::annotate(std::exception_ptr e, const std::string& what) const {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    return make_error(err.code(), fmt::format("{}: {}", what, err.what()));
  } catch (const std::exception& err) {
    return make_error(ErrorCode::kInternal, fmt::format("{}: {}", what, err.what()));
  } catch (...) {
    return make_error(ErrorCode::kInternal, what + ": a non-standard exception");
  }
}

void StagedTransport::require_stager(const Device& device, const char* what, int peer, std::size_t bytes) const {
  if (stager_ && stager_->handles(device)) return;
  throw InvalidUsageError(fmt::format("{} rank {} over {} ({} on {}): {} cannot move {} memory and this build has "
                                      "no stager for it (dcomm was built without CUDA); use host memory",
                                      what, peer, name(), format_bytes(bytes), to_string(device), name(),
                                      to_string(device)));
}

// ---- sending

void StagedTransport::isend(int peer, uint64_t tag, const void* data, std::size_t bytes, const Device& device,
                            OpPtr op) {
  Send s{peer, tag, data, bytes, device, std::move(op)};
  if (!blocked_.empty() || !broken_.empty()) {
    const auto key = std::make_pair(peer, tag);
    if (auto b = broken_.find(key); b != broken_.end()) {
      s.op->fail(b->second);
      return;
    }
    if (auto q = blocked_.find(key); q != blocked_.end()) {
      q->second.push_back(std::move(s));
      return;
    }
  }
  issue(std::move(s));
}

void StagedTransport::issue(Send s) {
  if (!needs_staging(s.device, s.bytes)) {
    // A zero-byte device send reads nothing, so it goes as a plain host message.
    const Device d = s.device.is_host() || inner_->supports_device(s.device) ? s.device : Device::host();
    inner_->isend(s.peer, s.tag, s.data, s.bytes, d, std::move(s.op));
    return;
  }
  require_stager(s.device, "send to", s.peer, s.bytes);
  auto download = std::make_unique<Download>(*stager_, s.device, s.data, s.bytes);  // starts the first copies
  StagedSend& st = sends_.emplace_back();
  st.send = std::move(s);
  st.header = Header{kMagic, kVersion, st.send.bytes, stager_->chunk_bytes()};
  st.download = std::move(download);
  blocked_[{st.send.peer, st.send.tag}];  // later sends on this (peer, tag) wait until every chunk is issued
  inner_->isend(st.send.peer, st.send.tag | kStagedBit, &st.header, sizeof(Header), Device::host(), st.header_op);
}

void StagedTransport::unblock(int peer, uint64_t tag) {
  auto node = blocked_.extract({peer, tag});
  if (node.empty()) return;
  std::deque<Send>& queue = node.mapped();
  while (!queue.empty()) {
    Send s = std::move(queue.front());
    queue.pop_front();
    issue(std::move(s));
    if (auto q = blocked_.find({peer, tag}); q != blocked_.end()) {
      // That one was staged too: the rest wait behind it.
      for (auto& rest : queue) q->second.push_back(std::move(rest));
      return;
    }
  }
}

bool StagedTransport::advance(StagedSend& s) {
  auto what = [&](std::size_t chunk) {
    return fmt::format("staged send of {} from {} to rank {} over {} (chunk {} of {})", format_bytes(s.send.bytes),
                       to_string(s.send.device), s.send.peer, name(), chunk + 1, s.download->chunks());
  };
  bool moved = false;
  try {
    for (auto it = s.chunk_ops.begin(); it != s.chunk_ops.end();) {
      if (!it->second->done()) {
        ++it;
        continue;
      }
      if (failed(it->second)) {
        if (!s.error) s.error = annotate(it->second->error(), what(it->first));
      } else if (!s.error) {
        s.download->sent(it->first);  // frees its slot for the next copy
      }
      it = s.chunk_ops.erase(it);
      moved = true;
    }
    if (!s.error && failed(s.header_op)) s.error = annotate(s.header_op->error(), what(0));
    HostChunk c;
    while (!s.error && s.download->ready(&c)) {
      auto op = std::make_shared<Op>();
      s.chunk_ops.emplace_back(c.index, op);
      inner_->isend(s.send.peer, s.send.tag | kStagedBit, c.data, c.bytes, Device::host(), op);
      moved = true;
    }
  } catch (...) {
    if (!s.error) s.error = annotate(std::current_exception(), what(s.download->handed_out()));
  }
  if (s.error && !s.send.op->done()) s.send.op->fail(s.error);
  if (!s.unblocked && (s.error || s.download->handed_out() == s.download->chunks())) {
    s.unblocked = true;
    if (s.error) {
      // The receiver would take what follows on this (peer, tag) for the missing chunks: later sends there fail.
      auto key = std::make_pair(s.send.peer, s.send.tag);
      broken_[key] = s.error;
      if (auto q = blocked_.find(key); q != blocked_.end()) {
        for (auto& later : q->second) later.op->fail(s.error);
        blocked_.erase(q);
      }
    } else {
      unblock(s.send.peer, s.send.tag);
    }
    moved = true;
  }
  return moved;
}

bool StagedTransport::finished(StagedSend& s) {
  if (!s.header_op->done() || !s.chunk_ops.empty()) return false;  // the inner transport still reads our memory
  if (s.error) return true;
  if (!s.download->done()) return false;
  s.send.op->complete(s.send.bytes);
  return true;
}

// ---- receiving

void StagedTransport::arrived(Transport& /*from*/, const Incoming& msg) {
  if (reading_ == 0 && (msg.tag & kStagedBit) == 0) {
    sink_->arrived(*this, msg);  // the common case: a plain message, nothing held back
    return;
  }
  PeerIn& p = peers_in_[msg.source];
  if (p.header) {
    p.held.push_back(msg);  // announced after the header being read, to keep the sender's order
    return;
  }
  route_arrival(msg.source, p, msg);
}

void StagedTransport::route_arrival(int source, PeerIn& p, const Incoming& msg) {
  if ((msg.tag & kStagedBit) == 0) {
    sink_->arrived(*this, msg);
    return;
  }
  const uint64_t tag = msg.tag & ~kStagedBit;
  if (auto open = p.open.find(tag); open != p.open.end()) {
    chunk_arrived(p, open, msg);
    return;
  }
  if (msg.bytes != sizeof(Header)) {
    inner_->discard(msg);
    throw Error(ErrorCode::kInternal,
                fmt::format("{}: rank {} sent a staged message on tag {} whose header has {} (expected {}); do both "
                            "ranks run the same dcomm build?",
                            name(), source, tag, format_bytes(msg.bytes), format_bytes(sizeof(Header))));
  }
  p.header = std::make_unique<Header>();
  p.header_op = std::make_shared<Op>();
  p.header_msg = msg;
  ++reading_;
  inner_->receive(msg, p.header.get(), Device::host(), p.header_op);
  finish_header(source, p);
}

bool StagedTransport::finish_header(int source, PeerIn& p) {
  if (!p.header || !p.header_op->done()) return false;
  --reading_;
  const Header h = *p.header;
  p.header.reset();
  const uint64_t tag = p.header_msg.tag & ~kStagedBit;
  if (failed(p.header_op)) {
    std::rethrow_exception(annotate(p.header_op->error(),
                                    fmt::format("{}: the header of a staged message from rank {} on tag {}", name(),
                                                source, tag)));
  }
  if (h.magic != kMagic || h.version != kVersion || h.bytes == 0 || h.chunk == 0) {
    throw Error(ErrorCode::kInternal,
                fmt::format("{}: rank {} sent a malformed staged-message header on tag {} (magic {:#x}, version {}, "
                            "{} bytes, chunk {}); do both ranks run the same dcomm build?",
                            name(), source, tag, h.magic, h.version, h.bytes, h.chunk));
  }
  auto in = std::make_unique<StagedIn>();
  in->source = source;
  in->tag = tag;
  in->bytes = h.bytes;
  in->chunk = h.chunk;
  in->chunks = chunk_count(h.bytes, h.chunk);
  const uint64_t token = next_token_++;
  p.open[tag].push_back(token);
  in_.emplace(token, std::move(in));
  sink_->arrived(*this, Incoming{source, tag, h.bytes, token, true});
  // What arrived behind the header goes on, in order, until another header has to be read.
  while (!p.header && !p.held.empty()) {
    Incoming next = p.held.front();
    p.held.pop_front();
    route_arrival(source, p, next);
  }
  return true;
}

void StagedTransport::chunk_arrived(PeerIn& p, std::map<uint64_t, std::deque<uint64_t>>::iterator open,
                                    const Incoming& msg) {
  StagedIn& in = *in_.at(open->second.front());
  if (++in.arrived == in.chunks) {
    open->second.pop_front();
    if (open->second.empty()) p.open.erase(open);
  }
  if (in.state == StagedIn::State::kDiscarding) {
    inner_->discard(msg);
    return;
  }
  in.waiting.push_back(msg);
  if (in.state == StagedIn::State::kReceiving) pump(in);
}

void StagedTransport::receive(const Incoming& msg, void* dst, const Device& device, OpPtr op) {
  const bool direct = device.is_host() || inner_->supports_device(device);
  if (!msg.staged) {
    if (direct || msg.bytes == 0) {
      inner_->receive(msg, dst, direct ? device : Device::host(), std::move(op));
      return;
    }
    // Sent from host memory into a device buffer: receive into host memory, then upload in chunks.
    require_stager(device, "recv from", msg.source, msg.bytes);
    auto upload = std::make_unique<Upload>(*stager_, device, dst, msg.bytes);
    Bounce& b = bounces_.emplace_back();
    b.buf.resize(msg.bytes);
    b.upload = std::move(upload);
    b.msg = msg;
    b.op = std::move(op);
    inner_->receive(msg, b.buf.data(), Device::host(), b.recv_op);
    return;
  }
  StagedIn& in = *in_.at(msg.token);
  if (!direct) {
    require_stager(device, "recv from", msg.source, msg.bytes);
    in.upload = std::make_unique<Upload>(*stager_, device, dst, in.bytes);
  }
  in.state = StagedIn::State::kReceiving;
  in.dst = static_cast<char*>(dst);
  in.device = device;
  in.op = std::move(op);
  pump(in);
}

void StagedTransport::fail_in(StagedIn& in, std::exception_ptr e) {
  if (!in.failed && in.op && !in.op->done()) in.op->fail(e);
  in.failed = true;
  stop_taking(in);
}

void StagedTransport::stop_taking(StagedIn& in) {
  in.state = StagedIn::State::kDiscarding;
  for (auto& c : in.waiting) inner_->discard(c);
  in.waiting.clear();
}

bool StagedTransport::pump(StagedIn& in) {
  auto what = [&](std::size_t chunk) {
    return fmt::format("staged recv of {} into {} from rank {} over {} (chunk {} of {})", format_bytes(in.bytes),
                       to_string(in.device), in.source, name(), chunk + 1, in.chunks);
  };
  bool moved = false;
  try {
    while (!in.failed && !in.waiting.empty()) {
      const Incoming c = in.waiting.front();
      const std::size_t index = in.pulled;
      if (c.bytes != chunk_size(index, in.bytes, in.chunk)) {
        fail_in(in, make_error(ErrorCode::kInternal,
                               fmt::format("{}: the chunk has {}, expected {}; do both ranks run the same dcomm "
                                           "build?",
                                           what(index), format_bytes(c.bytes),
                                           format_bytes(chunk_size(index, in.bytes, in.chunk)))));
        break;
      }
      void* where = in.upload ? in.upload->lend(index) : in.dst + index * in.chunk;
      if (where == nullptr) break;  // every slot still holds a chunk on its way to the device
      in.waiting.pop_front();
      ++in.pulled;
      auto op = std::make_shared<Op>();
      in.pulls.emplace_back(index, op);
      inner_->receive(c, where, in.upload ? Device::host() : in.device, op);
      moved = true;
    }
    for (auto it = in.pulls.begin(); it != in.pulls.end();) {
      if (!it->second->done()) {
        ++it;
        continue;
      }
      if (failed(it->second)) {
        fail_in(in, annotate(it->second->error(), what(it->first)));
      } else if (!in.failed) {
        if (in.upload) in.upload->filled(it->first);
        ++in.landed;
      }
      it = in.pulls.erase(it);
      moved = true;
    }
    if (!in.failed && in.landed == in.chunks && !in.op->done() && (!in.upload || in.upload->done())) {
      in.op->complete(in.bytes);
      moved = true;
    }
  } catch (...) {
    fail_in(in, annotate(std::current_exception(), what(in.pulled)));
  }
  return moved;
}

bool StagedTransport::advance(Bounce& b) {
  if (!b.recv_op->done() || b.op->done()) return false;
  bool moved = false;
  try {
    if (failed(b.recv_op)) std::rethrow_exception(b.recv_op->error());
    const std::size_t chunk = stager_->chunk_bytes();
    while (b.upload->lent() < b.upload->chunks()) {
      const std::size_t i = b.upload->lent();
      void* slot = b.upload->lend(i);
      if (slot == nullptr) break;
      std::memcpy(slot, b.buf.data() + i * chunk, chunk_size(i, b.msg.bytes, chunk));
      b.upload->filled(i);
      moved = true;
    }
    if (b.upload->done()) {
      b.op->complete(b.msg.bytes);
      moved = true;
    }
  } catch (...) {
    b.op->fail(annotate(std::current_exception(),
                        fmt::format("recv of {} from rank {} over {} into device memory", format_bytes(b.msg.bytes),
                                    b.msg.source, name())));
    moved = true;
  }
  return moved;
}

void StagedTransport::discard(const Incoming& msg) {
  if (!msg.staged) {
    inner_->discard(msg);
    return;
  }
  auto it = in_.find(msg.token);
  if (it != in_.end()) stop_taking(*it->second);
}

// ---- progress and close

bool StagedTransport::progress(ArrivalSink& sink) {
  sink_ = &sink;
  bool moved = inner_->progress(*this);
  if (reading_ > 0) {
    for (auto& [source, p] : peers_in_) moved = finish_header(source, p) || moved;
  }
  for (auto it = sends_.begin(); it != sends_.end();) {
    moved = advance(*it) || moved;
    if (finished(*it)) {
      it = sends_.erase(it);
      moved = true;
    } else {
      ++it;
    }
  }
  for (auto it = in_.begin(); it != in_.end();) {
    StagedIn& in = *it->second;
    if (in.state == StagedIn::State::kReceiving) moved = pump(in) || moved;
    const bool over = in.state == StagedIn::State::kDiscarding || (in.op && in.op->done());
    if (over && in.arrived == in.chunks && in.pulls.empty() && in.waiting.empty()) {
      it = in_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = bounces_.begin(); it != bounces_.end();) {
    moved = advance(*it) || moved;
    if (it->op->done()) {
      it = bounces_.erase(it);
    } else {
      ++it;
    }
  }
  return moved;
}

void StagedTransport::close() noexcept {
  if (closed_) return;
  closed_ = true;
  inner_->close();  // fails what is in flight there: nothing reads or writes our slots and buffers afterwards
  auto aborted = std::make_exception_ptr(AbortedError(
      fmt::format("{}: the transport was closed while a staged message was in flight (the group was destroyed or "
                  "aborted)",
                  name())));
  auto fail = [&](const OpPtr& op) {
    if (op && !op->done()) op->fail(aborted);
  };
  for (auto& s : sends_) fail(s.send.op);
  for (auto& [key, queue] : blocked_) {
    for (auto& s : queue) fail(s.op);
  }
  for (auto& [token, in] : in_) fail(in->op);
  for (auto& b : bounces_) fail(b.op);
  sends_.clear();  // slots wait for their copies as they go
  blocked_.clear();
  in_.clear();
  bounces_.clear();
  peers_in_.clear();
}

}  // namespace dcomm::transport::staging
