// The split read of a single-copy message (shm_split.hpp), both sides:
//   receiver: split_read sets the pair's board up, posts kSplit and reads from the front; finish_split completes
//             the receive (and acks) once the sender's pieces are written - at once, usually, or from progress();
//   sender:   help_split, from its progress when it drains kSplit, and help_splits, from each progress call after,
//             write from the back, a piece a call, while its send waits for the ack.
// The ack comes only after the sender's part is written, so its buffer is still there for the receiver to read
// that part itself if the sender's write failed.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

#include <dcomm/error.hpp>

#include "transports/shm/shm_cma.hpp"
#include "transports/shm/shm_transport.hpp"

namespace dcomm::transport::shm {

SplitClaim split_read_piece(SplitBoard& b, uint16_t gen, uint64_t bytes, int pid, char* local, uint64_t remote,
                            int* err) {
  const SplitClaim c = split_take(b, gen, bytes, split_piece(bytes), true);
  *err = c.empty() ? 0 : cma_read(pid, local + c.begin, remote + c.begin, c.end - c.begin);
  return c;
}

SplitClaim split_write_piece(SplitBoard& b, uint16_t gen, uint64_t msg_id, uint64_t bytes, int pid, const char* local,
                             uint64_t remote, int* err) {
  const SplitClaim c = split_take(b, gen, bytes, split_piece(bytes), false);
  *err = c.empty()                       ? 0
         : !split_claim_is_for(b, msg_id) ? ESTALE
                                          : cma_write(pid, remote + c.begin, local + c.begin, c.end - c.begin);
  return c;
}

bool ShmTransport::split_read(int from, const RecordHeader& rts, char* dst, OpPtr& op) {
  Peer& p = peer(from);
  // A pair that never runs at once gains nothing but a call; one board a pair, so one split read at a time.
  if (!split_ || p.shares_core || in_splits_.count(from) != 0 || rts.bytes < kSplitMinBytes ||
      split_pages(rts.bytes) > kSplitMaxPages) {
    return false;
  }
  const Clock::time_point since = Clock::now();
  SplitBoard& board = p.in.split();
  if (++p.split_gen == 0) p.split_gen = 1;
  const uint16_t gen = p.split_gen;
  split_open(board, gen, rts.bytes, rts.msg_id);
  RecordHeader h;
  h.kind = RecordKind::kSplit;
  h.msg_id = rts.msg_id;
  h.bytes = rts.bytes;
  h.addr = reinterpret_cast<uint64_t>(dst);
  h.offset = gen;
  post(p, h, nullptr);
  InSplit s{std::move(op), rts, dst, 0, gen, since, false};
  int err = 0;
  for (SplitClaim c; !(c = split_read_piece(board, gen, rts.bytes, p.info.pid, dst, rts.addr, &err)).empty();) {
    if (err == ESRCH) {  // the sender is gone: it writes nothing more either
      split_cancel(board, gen);
      s.op->fail(std::make_exception_ptr(RemoteError(fmt::format(
          "shm: recv from rank {} ({}, read by both sides, {} of the front in): process {} (rank {}) on host {} "
          "exited in the middle of the message; check rank {}'s log",
          from, format_bytes(rts.bytes), format_bytes(c.begin), p.info.pid, from, p.info.hostname, from))));
      return true;
    }
    if (err != 0) {  // permission lost: once the sender's pieces are written, stream the message instead
      split_cancel(board, gen);
      s.fall_back = true;
      break;
    }
  }
  s.sender_bytes = split_sender_bytes(board, rts.bytes);
  in_splits_.emplace(from, std::move(s));
  if (finish_split(from)) in_splits_.erase(from);
  return true;
}

bool ShmTransport::finish_split(int from) {
  Peer& p = peer(from);
  InSplit& s = in_splits_.at(from);
  const SplitBoard& board = p.in.split();
  const int err = board.error.load(std::memory_order_acquire);
  if (err == 0 && board.done.load(std::memory_order_acquire) < s.sender_bytes) return false;
  // The sender writes nothing more: its pieces are in, or it failed and stopped.
  if (err != 0 && !s.fall_back) {
    // Its write failed (EPERM: it may not write here; its buffer is still there, the ack not sent): read its part.
    const uint64_t begin = s.rts.bytes - s.sender_bytes;
    const int mine = cma_read(p.info.pid, s.dst + begin, s.rts.addr + begin, s.sender_bytes);
    if (mine == ESRCH) {
      s.op->fail(sender_exited(from, s.rts.bytes));
      return true;
    }
    s.fall_back = mine != 0;
  }
  if (s.fall_back) {
    p.cma = false;
    start_stream(from, s.rts, s.dst, std::move(s.op));
    return true;
  }
  p.history.record(LargeProtocol::kCma, s.rts.bytes, std::chrono::duration<double>(Clock::now() - s.since).count());
  ++counts_.cma;
  if (s.sender_bytes != 0) ++counts_.split;
  ack(from, s.rts.msg_id);
  s.op->complete(s.rts.bytes);
  return true;
}

bool ShmTransport::finish_splits() {
  bool moved = false;
  for (auto it = in_splits_.begin(); it != in_splits_.end();) {
    if (finish_split(it->first)) {
      it = in_splits_.erase(it);
      moved = true;
    } else {
      ++it;
    }
  }
  return moved;
}

void ShmTransport::help_split(int to, const RecordHeader& h) {
  // Nothing to help with, or no right to write there: the receiver reads it all.
  if (sends_.count(h.msg_id) == 0 || !peer(to).cma) return;
  Helping w{to, h.msg_id, h.addr, static_cast<uint16_t>(h.offset)};
  if (!help_piece(w)) helping_.push_back(w);
}

bool ShmTransport::help_splits() {
  const std::size_t before = helping_.size();
  helping_.erase(std::remove_if(helping_.begin(), helping_.end(), [this](const Helping& w) { return help_piece(w); }),
                 helping_.end());
  return helping_.size() != before || !helping_.empty();
}

bool ShmTransport::help_piece(const Helping& w) {
  // One piece a call (at most 1 MiB, ~60 us), as a pull reads a stalled stream: a sender busy in one long copy
  // would feed none of its streams to other peers meanwhile, and they would pull too.
  auto it = sends_.find(w.msg_id);
  if (it == sends_.end()) return true;  // acknowledged: the receiver took the rest
  const OutMessage& m = it->second;
  Peer& p = peer(w.to);
  SplitBoard& board = p.out.split();
  int err = 0;
  const SplitClaim c = split_write_piece(board, w.gen, w.msg_id, m.bytes, p.info.pid, m.data, w.addr, &err);
  if (c.empty()) return true;
  if (err != 0) {
    board.error.store(err, std::memory_order_release);
    return true;
  }
  board.done.fetch_add(c.end - c.begin, std::memory_order_release);
  return false;
}

}  // namespace dcomm::transport::shm
