// The shm transport's message path: isend, progress (backlogs, streams, draining the rings), receive, discard.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <dcomm/error.hpp>

#include "common/log.hpp"
#include "transports/shm/shm_cma.hpp"
#include "transports/shm/shm_transport.hpp"

namespace dcomm::transport::shm {
namespace {

// Records taken from one peer's ring per progress() call, so one busy peer cannot starve the others. A drain
// also stops once it has taken a ring's worth of records (Ring::record_bytes): a sender on another core refills the
// ring as it is drained, and without that bound one call would take a whole streamed message (256 records of 256
// KiB: 64 MiB, milliseconds inside one test()) while this rank feeds none of its own streams - the pull bounds
// (shm_stream.cpp) assume a drain takes at most a ring's worth.
constexpr int kDrainBudget = 256;

}  // namespace

void ShmTransport::post(Peer& p, const RecordHeader& h, const void* payload) {
  if (!p.out_mapped) {
    p.out.prefault();
    p.out_mapped = true;
  }
  if (p.backlog.empty() && p.out.try_write(h, payload)) return;
  Backlogged b{h, {}};
  if (h.len != 0 && payload != nullptr) b.payload.assign(static_cast<const char*>(payload), static_cast<const char*>(payload) + h.len);
  p.backlog.push_back(std::move(b));
}

bool ShmTransport::flush_backlog(Peer& p) {
  bool moved = false;
  while (!p.backlog.empty() && p.out.try_write(p.backlog.front().h, p.backlog.front().payload.data())) {
    p.backlog.pop_front();
    moved = true;
  }
  return moved;
}

void ShmTransport::isend(int to, uint64_t tag, const void* data, std::size_t bytes, const Device& /*device*/,
                         OpPtr op) {
  Peer& p = peer(to);
  RecordHeader h;
  h.tag = tag;
  h.bytes = bytes;
  if (bytes <= knobs_.eager_bytes) {
    h.kind = RecordKind::kEager;
    h.len = bytes;
    post(p, h, data);
    op->complete(bytes);
    return;
  }
  h.kind = RecordKind::kRts;
  h.msg_id = next_msg_id_++;
  h.addr = reinterpret_cast<uint64_t>(data);
  sends_.emplace(h.msg_id, OutMessage{to, static_cast<const char*>(data), bytes, 0, std::move(op)});
  post(p, h, nullptr);
}

bool ShmTransport::send_now(int to, uint64_t tag, const void* data, std::size_t bytes) {
  // What isend does with an eager message, without the op: a record that finds the ring full waits in the backlog
  // with its payload copied, so the send is over either way.
  if (bytes > knobs_.eager_bytes) return false;
  RecordHeader h;
  h.kind = RecordKind::kEager;
  h.tag = tag;
  h.bytes = bytes;
  h.len = bytes;
  post(peer(to), h, data);
  return true;
}

bool ShmTransport::progress(ArrivalSink& sink) {
  if (closed_) return false;
  bool moved = false;
  for (int r : connected_) moved = flush_backlog(peer(r)) || moved;
  moved = feed_streams() || moved;
  for (int r : connected_) moved = drain(r, sink) || moved;
  if (!in_streams_.empty()) moved = pull_stalled() || moved;
  if (!helping_.empty()) moved = help_splits() || moved;
  if (!in_splits_.empty()) moved = finish_splits() || moved;
  return moved;
}

bool ShmTransport::drain(int from, ArrivalSink& sink) {
  Peer& p = peer(from);
  if (!p.in_mapped) {
    if (p.in.peek() == nullptr) return false;
    p.in.prefault();
    p.in_mapped = true;
  }
  int n = 0;
  uint64_t taken = 0;
  for (const RecordHeader* h; n < kDrainBudget && taken < knobs_.ring_bytes && (h = p.in.peek()) != nullptr; ++n) {
    // Copy the header out: the peer cannot overwrite it before pop(), but a copy keeps handle() simple.
    RecordHeader copy = *h;
    taken += Ring::record_bytes(copy);
    handle(from, copy, p.in.payload(h), sink);
    p.in.pop();
  }
  return n > 0;
}

void ShmTransport::handle(int from, const RecordHeader& h, const char* payload, ArrivalSink& sink) {
  switch (h.kind) {
    case RecordKind::kEager: {
      // Announced with its payload still in the ring: received (or dropped) during the announcement - the usual
      // small message, its receive posted - it is never held. Otherwise it is copied out so the ring keeps
      // flowing; tokens grow and announcements do not nest, so held_ stays in token order.
      const uint64_t token = next_token_++;
      announcing_ = Announcing{token, payload, h.len};
      try {
        sink.arrived(*this, Incoming{from, h.tag, h.bytes, token});
      } catch (...) {
        announcing_ = {};  // the mesh fails (it poisons itself): nothing may read the ring's payload later
        throw;
      }
      const bool taken = announcing_.token == 0;
      announcing_ = {};
      if (!taken) held_.push_back(Held{token, from, h, std::vector<char>(payload, payload + h.len)});
      return;
    }
    case RecordKind::kRts: {
      const uint64_t token = next_token_++;
      held_.push_back(Held{token, from, h, {}});
      sink.arrived(*this, Incoming{from, h.tag, h.bytes, token});
      return;
    }
    case RecordKind::kAck: {
      auto it = sends_.find(h.msg_id);
      if (it == sends_.end()) return;
      it->second.op->complete(it->second.bytes);
      sends_.erase(it);
      return;
    }
    case RecordKind::kCts: {
      auto it = sends_.find(h.msg_id);
      if (it == sends_.end()) return;
      it->second.ack_at_end = h.offset != 0;
      streams_.push_back(h.msg_id);
      return;
    }
    case RecordKind::kData:
      on_data(from, h, payload);
      return;
    case RecordKind::kStop: {
      auto it = sends_.find(h.msg_id);
      if (it != sends_.end()) it->second.stopped = true;
      return;
    }
    case RecordKind::kSplit:
      help_split(from, h);
      return;
    case RecordKind::kPad: return;
  }
}

void ShmTransport::ack(int to, uint64_t msg_id) {
  RecordHeader h;
  h.kind = RecordKind::kAck;
  h.msg_id = msg_id;
  post(peer(to), h, nullptr);
}

std::deque<ShmTransport::Held>::iterator ShmTransport::find_held(uint64_t token) {
  // The usual ones: the message being announced (the last), or the oldest held.
  if (held_.empty()) return held_.end();
  if (held_.back().token == token) return std::prev(held_.end());
  if (held_.front().token == token) return held_.begin();
  auto it = std::lower_bound(held_.begin(), held_.end(), token,
                             [](const Held& h, uint64_t t) { return h.token < t; });
  return it != held_.end() && it->token == token ? it : held_.end();
}

void ShmTransport::erase_held(std::deque<Held>::iterator it) {
  if (it == held_.begin()) {
    held_.pop_front();  // the usual case, without deque::erase's general shuffle
  } else {
    held_.erase(it);
  }
}

void ShmTransport::receive(const Incoming& msg, void* dst, const Device& /*device*/, OpPtr op) {
  if (msg.token == announcing_.token) {  // the small message's path: straight from the ring
    if (announcing_.len != 0) std::memcpy(dst, announcing_.payload, announcing_.len);
    announcing_.token = 0;
    op->complete(msg.bytes);
    return;
  }
  auto it = find_held(msg.token);
  if (it == held_.end()) {
    op->fail(std::make_exception_ptr(Error(ErrorCode::kInternal, "shm: receive of an unknown message")));
    return;
  }
  if (it->h.kind == RecordKind::kEager) {
    // A small message received after its announcement: the usual one is the first held.
    const std::size_t len = it->h.len;
    if (len != 0) std::memcpy(dst, it->owned.data(), len);
    erase_held(it);
    op->complete(len);
    return;
  }
  Held held = std::move(*it);
  erase_held(it);
  Peer& p = peer(held.peer);
  if (p.cma && protocol_for(held.peer, held.h) == LargeProtocol::kCma) {
    if (split_read(held.peer, held.h, static_cast<char*>(dst), op)) return;
    const Clock::time_point t0 = Clock::now();
    int err = cma_read(p.info.pid, dst, held.h.addr, held.h.bytes);
    if (err == 0) {
      p.history.record(LargeProtocol::kCma, held.h.bytes, std::chrono::duration<double>(Clock::now() - t0).count());
      ++counts_.cma;
      ack(held.peer, held.h.msg_id);
      op->complete(held.h.bytes);
      return;
    }
    if (err == ESRCH) {
      op->fail(sender_exited(held.peer, held.h.bytes));
      return;
    }
    // Permission can be lost (a peer that changed credentials): stream from now on.
    p.cma = false;
  }
  start_stream(held.peer, held.h, dst, std::move(op));
}

LargeProtocol ShmTransport::protocol_for(int from, const RecordHeader& h) {
  Peer& p = peer(from);
  MessageFacts m;
  m.bytes = h.bytes;
  m.chunk_bytes = knobs_.chunk_bytes;
  m.cma_allowed = p.cma;
  m.shares_core = p.shares_core;
  // Large sends of this rank's own in flight: its core will copy its outgoing stream too.
  m.two_way = !sends_.empty();
  m.streams_stall = p.stalls.high() && ++p.stall_skips % kStallProbeEvery != 0;
  const bool measured = knobs_.protocol == ProtocolMode::kAuto && p.cma && !p.shares_core;
  LargeProtocol choice = knobs_.protocol == ProtocolMode::kMeasured && p.cma && !p.shares_core
                             ? p.history.pick(h.bytes)
                             : choose(knobs_.protocol, measured ? calibration() : Calibration{}, m);
  const unsigned bit = 1u << static_cast<unsigned>(choice);
  if ((p.logged & bit) == 0) {
    p.logged |= bit;
    DCOMM_INFO("shm rank {}: first {} message from rank {}: {} ({}{})", ctx_.self.rank,
               choice == LargeProtocol::kCma ? "single-copy" : "streamed", from, to_string(choice),
               format_bytes(h.bytes), m.two_way ? ", sending too" : "");
  }
  return choice;
}

void ShmTransport::discard(const Incoming& msg) {
  if (msg.token == announcing_.token) {
    announcing_.token = 0;  // dropped from the ring as it is popped
    return;
  }
  auto it = find_held(msg.token);
  if (it == held_.end()) return;
  // A large message is dropped without reading it; the ack still completes the sender's op.
  if (it->h.kind == RecordKind::kRts) ack(it->peer, it->h.msg_id);
  erase_held(it);
}

}  // namespace dcomm::transport::shm
