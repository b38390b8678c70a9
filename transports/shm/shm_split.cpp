// The split read of a single-copy message (shm_split.hpp), both sides:
//   receiver: split_read sets the pair's board up, posts kSplit and reads from the front; finish_split completes
//             the receive (and acks) once the sender's pieces are written - at once, usually, or from progress();
//   sender:   help_split, from its progress when it drains kSplit, writes from the back while its send waits for
//             the ack. The ack comes only after the sender's part is written, so its buffer is still there for
//             the receiver to read that part itself if the sender's write failed.
#include <fmt/format.h>

#include <cerrno>

#include <dcomm/error.hpp>

#include "transports/shm/shm_cma.hpp"
#include "transports/shm/shm_transport.hpp"

namespace dcomm::transport::shm {

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
  const uint64_t piece = split_piece(rts.bytes);
  for (SplitClaim c; !(c = split_take(board, gen, rts.bytes, piece, true)).empty();) {
    const int err = cma_read(p.info.pid, dst + c.begin, rts.addr + c.begin, c.end - c.begin);
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
      s.op->fail(std::make_exception_ptr(RemoteError(fmt::format(
          "shm: recv from rank {} ({}): process {} on host {} exited before its message could be read", from,
          format_bytes(s.rts.bytes), p.info.pid, p.info.hostname))));
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
  auto it = sends_.find(h.msg_id);
  Peer& p = peer(to);
  if (it == sends_.end() || !p.cma) return;  // nothing to help with, or no right to write there: the receiver reads it all
  const OutMessage& m = it->second;
  SplitBoard& board = p.out.split();
  const auto gen = static_cast<uint16_t>(h.offset);
  const uint64_t piece = split_piece(m.bytes);
  for (SplitClaim c; !(c = split_take(board, gen, m.bytes, piece, false)).empty();) {
    const int err = split_claim_is_for(board, h.msg_id)
                        ? cma_write(p.info.pid, h.addr + c.begin, m.data + c.begin, c.end - c.begin)
                        : ESTALE;
    if (err != 0) {
      board.error.store(err, std::memory_order_release);
      return;
    }
    board.done.fetch_add(c.end - c.begin, std::memory_order_release);
  }
}

}  // namespace dcomm::transport::shm
