// Streaming a large message through the ring (the receiver chose it: shm_protocol.hpp), both sides.
//   receiver: start_stream sends kCts; on_data copies each piece out of the ring as it is drained;
//   sender:   feed_streams writes pieces while the ring has room, from its own progress calls.
// A stream needs the sender to progress. When it does not (descheduled by the scheduler, busy outside dcomm, or
// asleep in its wait loop: Backoff sleeps after 2 ms without progress, and a sender that posted its message early
// has been waiting that long), a receiver that may read the sender's memory pulls the rest itself after
// pull_bounds() without a piece: it tells the sender to stop (kStop), reads the rest with process_vm_readv in
// kPullPiece pieces, one per progress call, and acks. Such a sender therefore completes at the ack, not when its
// last piece is in the ring (kCts says which), so its buffer stays valid for the pull.
// Why pieces, not one read: a rank busy in one long read feeds none of its own streams meanwhile, and its peer,
// seeing no piece, would pull too - one stall would turn every stream of a two-way exchange into reads.
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

// The longest quiet spell of a sender that runs and progresses.
//   One way, it writes its next piece as soon as the ring has room: a chunk's copy (17 us for 256 KiB at 15 GB/s).
//     A stall is four of those, and at least kMinPullAfterOneWay.
//   Two ways, each rank alternates between draining its ring (up to a ring's worth of copies in one go) and
//     feeding its own streams, so its peer may see no piece for a ring and a chunk's copy (~100 us for 1 MiB +
//     256 KiB at 13 GB/s). A stall is twice that, and at least kMinPullAfterTwoWay.
// Rough evidence (a loaded 2-core machine, one run each, streaming forced): bounds of 50 / 150 / 400 / 1000 us
// pulled 87 / 72 / 32 / 18-30% of ring all_gather's (two-way) streams, and 79 / 23 / 14 / 21% of broadcast's
// (one-way). Under load most one-way stalls are real (the sender is off its core), and an early pull is what
// then lets the peer switch to CMA (StallRate) instead of paying the bound on every message.
constexpr std::chrono::microseconds kMinPullAfterOneWay{50};
constexpr std::chrono::microseconds kMinPullAfterTwoWay{200};
constexpr std::chrono::microseconds kPullAfterUnmeasured{400};
// ~20 us of process_vm_readv at 3.5 GB/s: far inside kMinPullAfter, so the peer keeps seeing pieces of this
// rank's own streams between them.
constexpr uint64_t kPullPiece = 64 << 10;

}  // namespace

PullBounds pull_bounds(const Calibration& cal, uint64_t chunk_bytes, uint64_t ring_bytes) {
  if (cal.copy_gbps <= 0) return {kPullAfterUnmeasured, kPullAfterUnmeasured};
  auto us = [&](double bytes) { return std::chrono::microseconds(static_cast<long long>(bytes / (cal.copy_gbps * 1e3))); };
  return {std::max(kMinPullAfterOneWay, us(4.0 * chunk_bytes)),
          std::max(kMinPullAfterTwoWay, us(2.0 * (ring_bytes + chunk_bytes)))};
}

void ShmTransport::start_stream(int from, const RecordHeader& rts, void* dst, OpPtr op) {
  Peer& p = peer(from);
  const bool pullable = p.cma;
  ++counts_.streamed;
  // Large sends of this rank's own in flight: its drains and feeds take turns (the longer bound).
  const auto bound = sends_.empty() ? pull_bounds_.one_way : pull_bounds_.two_way;
  in_streams_.emplace(std::make_pair(from, rts.msg_id),
                      InStream{static_cast<char*>(dst), rts.bytes, 0, std::move(op), rts.addr, pullable, false,
                               pullable ? Clock::now() : Clock::time_point{}, bound, false, {}, !sends_.empty()});
  RecordHeader h;
  h.kind = RecordKind::kCts;
  h.msg_id = rts.msg_id;
  h.offset = pullable ? 1 : 0;
  post(p, h, nullptr);
}

bool ShmTransport::feed_streams() {
  bool moved = false;
  for (auto it = streams_.begin(); it != streams_.end();) {
    auto s = sends_.find(*it);
    if (s == sends_.end() || s->second.stopped) {  // the receiver reads the rest itself
      it = streams_.erase(it);
      continue;
    }
    OutMessage& m = s->second;
    Peer& p = peer(m.peer);
    while (m.sent < m.bytes && p.backlog.empty()) {
      RecordHeader h;
      h.kind = RecordKind::kData;
      h.msg_id = s->first;
      h.bytes = m.bytes;
      h.offset = m.sent;
      h.len = std::min(knobs_.chunk_bytes, m.bytes - m.sent);
      if (!p.out.try_write(h, m.data + m.sent)) break;
      m.sent += h.len;
      moved = true;
    }
    if (m.sent == m.bytes) {
      if (!m.ack_at_end) {
        m.op->complete(m.bytes);
        sends_.erase(s);
      }
      it = streams_.erase(it);
    } else {
      ++it;
    }
  }
  return moved;
}

void ShmTransport::on_data(int from, const RecordHeader& h, const char* payload) {
  auto it = in_streams_.find({from, h.msg_id});
  if (it == in_streams_.end()) return;  // pulled already
  InStream& s = it->second;
  if (s.ack_at_end) {
    peer(from).last_piece = Clock::now();
    if (s.got == 0) s.first = peer(from).last_piece;
  }
  // Pieces come in order, but once this rank pulls, the sender's last pieces (written before it saw kStop) may
  // overlap what was read, or trail it: the bytes are the same, so take what extends [0, got) and drop the rest.
  if (h.offset > s.got || h.offset + h.len <= s.got) return;
  std::memcpy(s.dst + h.offset, payload, h.len);
  s.copied += static_cast<double>(h.tag) * 1e-9;  // the sender's copy of the piece (stream_seconds)
  s.got = h.offset + h.len;
  if (s.got == s.bytes) {
    finish_stream(from, h.msg_id, s, false);
    in_streams_.erase(it);
  }
}

void ShmTransport::finish_stream(int from, uint64_t msg_id, InStream& s, bool pulled) {
  if (s.ack_at_end) {
    // What this stream cost (ProtocolHistory; only where CMA is allowed, the one case with a choice, and the one
    // that keeps `since`).
    peer(from).history.record(LargeProtocol::kStream, s.bytes,
                              stream_seconds(s.since, s.first, Clock::now(), s.copied, s.two_way, pulled));
    ack(from, msg_id);
    StallRate& stalls = peer(from).stalls;
    const bool was_high = stalls.high();
    stalls.record(pulled);
    if (stalls.high() != was_high) {
      DCOMM_INFO("shm rank {}: {} of the recent streams from rank {} were pulled: {}", ctx_.self.rank,
                 fmt::format("{:.0f}%", stalls.value() * 100), from,
                 stalls.high() ? fmt::format("its large messages take cross-memory attach, one in {} still streams",
                                             kStallProbeEvery)
                               : std::string("its large messages stream again"));
    }
  }
  s.op->complete(s.bytes);
}

bool ShmTransport::pull_stalled() {
  bool moved = false;
  Clock::time_point now{};
  for (auto it = in_streams_.begin(); it != in_streams_.end();) {
    const int from = it->first.first;
    InStream& s = it->second;
    Peer& p = peer(from);
    if (!s.ack_at_end || !p.cma || s.gone) {
      ++it;
      continue;
    }
    if (now == Clock::time_point{}) now = Clock::now();
    if (!s.pulling && now - std::max(s.since, p.last_piece) < s.stall_bound) {
      ++it;
      continue;
    }
    if (pull_piece(from, it->first.second, s)) {
      it = in_streams_.erase(it);
    } else {
      ++it;
    }
    moved = true;
  }
  return moved;
}

bool ShmTransport::pull_piece(int from, uint64_t msg_id, InStream& s) {
  Peer& p = peer(from);
  if (!s.pulling) {
    s.pulling = true;
    ++counts_.pulled;
    RecordHeader h;
    h.kind = RecordKind::kStop;
    h.msg_id = msg_id;
    post(p, h, nullptr);
  }
  const uint64_t n = std::min(kPullPiece, s.bytes - s.got);
  int err = cma_read(p.info.pid, s.dst + s.got, s.addr + s.got, n);
  if (err == ESRCH) {
    s.op->fail(std::make_exception_ptr(RemoteError(fmt::format(
        "shm: recv from rank {} ({}, {} of it in): process {} (rank {}) on host {} exited in the middle of the "
        "message; check rank {}'s log",
        from, format_bytes(s.bytes), format_bytes(s.got), p.info.pid, from, p.info.hostname, from))));
    return true;
  }
  if (err == EFAULT) {
    // The sender's buffer is no longer there: its send was aborted, which happens when its own group failed (a third
    // rank died, say). Nothing more can come; the receive waits for the mesh to learn why - the sender's exit or
    // its closed transport, and the rank that failed first - or for its deadline, rather than fail here blaming
    // the wrong thing (found by failure_tune_shm_3: a survivor pulling from another survivor).
    s.gone = true;
    DCOMM_WARN("shm rank {}: recv from rank {} ({}, {} of it in): its buffer is gone (its send was aborted); waiting "
               "for the mesh to learn why",
               ctx_.self.rank, from, format_bytes(s.bytes), format_bytes(s.got));
    return false;
  }
  if (err != 0) {
    // Permission can be lost (a peer that changed credentials). The sender has stopped: there is no way to get
    // the rest, and the mesh turns this into an error that names the peer.
    p.cma = false;
    s.op->fail(std::make_exception_ptr(SystemError(
        fmt::format("shm: recv from rank {} ({}, {} of it in): process_vm_readv of process {} on host {} failed "
                    "after it stopped streaming; check ptrace permissions or set DCOMM_SHM_CMA=0",
                    from, format_bytes(s.bytes), format_bytes(s.got), p.info.pid, p.info.hostname),
        err)));
    return true;
  }
  s.got += n;
  if (s.got < s.bytes) return false;
  finish_stream(from, msg_id, s, true);
  return true;
}

}  // namespace dcomm::transport::shm
