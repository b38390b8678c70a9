// The shm transport's setup, liveness and teardown (the message path is in shm_progress.cpp).
#include "transports/shm/shm_transport.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <dcomm/error.hpp>

#include "common/env.hpp"
#include "common/process.hpp"
#include "common/log.hpp"
#include "transports/placement.hpp"
#include "transports/shm/shm_cma.hpp"
#include "transports/store_keys.hpp"

namespace dcomm::transport::shm {
namespace {

constexpr long long kDefaultEagerBytes = 16 << 10;
constexpr long long kDefaultChunkBytes = 256 << 10;
constexpr long long kDefaultRingBytes = 1 << 20;
constexpr long long kMinRingBytes = 1024;

uint64_t positive_knob(const char* name, long long fallback, long long min) {
  long long v = env::get_int(name, fallback);
  if (v < min) throw InvalidUsageError(fmt::format("{}={} is below the minimum {}", name, v, min));
  return static_cast<uint64_t>(v);
}

}  // namespace

Knobs Knobs::from_env() {
  Knobs k;
  k.eager_bytes = positive_knob("DCOMM_SHM_EAGER_BYTES", kDefaultEagerBytes, 0);
  k.chunk_bytes = positive_knob("DCOMM_SHM_CHUNK_BYTES", kDefaultChunkBytes, 1);
  k.ring_bytes = (positive_knob("DCOMM_SHM_RING_BYTES", kDefaultRingBytes, kMinRingBytes) + kRecordAlign - 1) /
                 kRecordAlign * kRecordAlign;
  k.cma = env::get_bool("DCOMM_SHM_CMA", true);
  k.split = env::get_bool("DCOMM_SHM_SPLIT", true);
  k.protocol = protocol_mode_from_env();
  uint64_t max_payload = k.ring_bytes / 2 - kRecordAlign;
  if (k.eager_bytes > max_payload || k.chunk_bytes > max_payload) {
    throw InvalidUsageError(fmt::format(
        "DCOMM_SHM_EAGER_BYTES ({}) and DCOMM_SHM_CHUNK_BYTES ({}) must each be at most half the ring less 64 "
        "bytes ({}, from DCOMM_SHM_RING_BYTES={})",
        k.eager_bytes, k.chunk_bytes, max_payload, k.ring_bytes));
  }
  return k;
}

ShmTransport::ShmTransport(const TransportContext& ctx)
    : ctx_(ctx),
      knobs_(Knobs::from_env()),
      mine_(Segment::create(segment_name(ctx.world_id, ctx.self.rank), ctx.self.rank, ctx.world_size,
                            knobs_.ring_bytes)),
      peers_(static_cast<std::size_t>(ctx.world_size)) {
  mine_.header()->probe_addr = cma_probe_address();
  mine_.header()->probe_value = cma_probe_value();
}

void ShmTransport::publish(Store& store) { store.set(rank_key("segment", ctx_.self.rank), mine_.name()); }

void ShmTransport::connect(Store& store, const std::vector<PeerInfo>& peers, const Deadline& deadline) {
  std::string what = fmt::format("shm connect rank {}/{}", ctx_.self.rank, ctx_.world_size);
  std::vector<int> ranks;
  for (const auto& info : peers) ranks.push_back(info.rank);
  wait_for_ranks(store, "segment", ranks, deadline, what, "publish their shm segment", ctx_.failures);
  for (const auto& info : peers) {
    Peer& p = peer(info.rank);
    p.info = info;
    p.seg = Segment::open(store.get_string(rank_key("segment", info.rank)), info.rank);
    if (p.seg.header()->owner_pid != info.pid) {
      throw Error(ErrorCode::kInternal, fmt::format("{}: segment {} belongs to pid {}, but rank {} is pid {}", what,
                                                    p.seg.name(), p.seg.header()->owner_pid, info.rank, info.pid));
    }
    p.out = p.seg.ring(ctx_.self.rank);
    p.in = mine_.ring(info.rank);
    if (knobs_.cma) {
      int err = cma_probe(info.pid, p.seg.header()->probe_addr, p.seg.header()->probe_value);
      p.cma = err == 0;
      if (!p.cma) {
        DCOMM_INFO("{}: cross-memory attach to rank {} (pid {}) not allowed ({}); large messages stream through "
                   "shared memory (check /proc/sys/kernel/yama/ptrace_scope)",
                   what, info.rank, info.pid, std::strerror(err));
      }
    }
    p.connected = true;
    connected_.push_back(info.rank);
  }
  mark_shared_cores(peers);
  const bool any_cma = std::any_of(connected_.begin(), connected_.end(),
                                   [&](int r) { return peers_[static_cast<std::size_t>(r)].cma; });
  // The measurement (once per process) serves the choice in auto mode and the stall bound of every pull.
  if (any_cma) pull_bounds_ = pull_bounds(calibration(), knobs_.chunk_bytes, knobs_.ring_bytes);
  log_choices(any_cma);
  // Once every peer has mapped this rank's segment its name can go: the mappings keep the memory, and a crash
  // from here on leaves nothing behind in /dev/shm.
  store.set(rank_key("mapped", ctx_.self.rank), std::string("1"));
  wait_for_ranks(store, "mapped", ranks, deadline, what, "map this rank's shm segment", ctx_.failures);
  mine_.unlink();
}

void ShmTransport::mark_shared_cores(const std::vector<PeerInfo>& peers) {
  // A pair shares a core only when both are bound to the same single one: then they never run at once. A node
  // that runs more ranks than cores (transports/placement.hpp) is not enough: its pairs often do run at once (a
  // third rank idle in a wait, or each pair's ranks on two cores), and the measured choice sees from each
  // message's outcome whether streams stall there (3 ranks on 2 cores, sendrecv: streams 0.3-0.7x of CMA's time
  // from 64 KiB; 4 ranks, two pairs at once: CMA ahead to 256 KiB, streams from 1 MiB).
  for (const auto& info : peers) peer(info.rank).shares_core = never_run_together(ctx_.self, info);
  // A split read spends the sender's core while it waits; with more ranks than cores that time belongs to another
  // rank (4 ranks on 2 cores, sendrecv 64 KiB: 1.30-1.45x OpenMPI's time split against 1.14-1.19x read alone).
  std::vector<PeerInfo> node{ctx_.self};
  node.insert(node.end(), peers.begin(), peers.end());
  split_ = knobs_.split && !shares_cores(node, 0);
}

void ShmTransport::log_choices(bool any_cma) const {
  if (!any_cma || knobs_.protocol != ProtocolMode::kAuto) {
    DCOMM_INFO("shm rank {}: large messages (over {}) {}", ctx_.self.rank, format_bytes(knobs_.eager_bytes),
               !any_cma ? "stream through the ring (no cross-memory attach)"
               : knobs_.protocol == ProtocolMode::kMeasured
                   ? std::string("take whichever of cross-memory attach and streaming measured faster lately "
                                 "(streaming by a margin of 1.25), per peer and size (ranks sharing a core: "
                                 "cross-memory attach; DCOMM_SHM_PROTOCOL=cma|stream forces one)")
                   : fmt::format("take {} (DCOMM_SHM_PROTOCOL)", to_string(knobs_.protocol)));
    return;
  }
  const Calibration& cal = calibration();
  auto from = [&](bool two_way) {
    uint64_t n = stream_threshold(cal, knobs_.eager_bytes + 1, knobs_.chunk_bytes, two_way);
    return n == 0 ? std::string("never") : fmt::format("from {}", format_bytes(n));
  };
  DCOMM_INFO("shm rank {}: measured {}; large messages stream {} one way, {} both ways, else take cross-memory "
             "attach (ranks sharing a core always do; DCOMM_SHM_PROTOCOL=cma|stream forces one); a stream with no "
             "piece for {} us ({} us when sending too) is pulled",
             ctx_.self.rank, describe(cal), from(false), from(true), pull_bounds_.one_way.count(),
             pull_bounds_.two_way.count());
}

std::string ShmTransport::peer_failure(int rank) {
  Peer& p = peer(rank);
  if (!p.connected) return {};
  if (p.seg.header()->closed.load(std::memory_order_acquire) != 0) {
    return fmt::format("rank {} (pid {} on host {}) closed its shm transport", rank, p.info.pid, p.info.hostname);
  }
  if (local_process_state(p.info.pid) == ProcessState::kExited) {
    return fmt::format("process {} (rank {}) on host {} exited", p.info.pid, rank, p.info.hostname);
  }
  return {};
}

std::exception_ptr ShmTransport::sender_exited(int from, uint64_t bytes) {
  const Peer& p = peer(from);
  return std::make_exception_ptr(RemoteError(
      fmt::format("shm: recv from rank {} ({}): process {} on host {} exited before its message could be read", from,
                  format_bytes(bytes), p.info.pid, p.info.hostname)));
}

std::exception_ptr ShmTransport::closed_error(const char* what) const {
  return std::make_exception_ptr(
      AbortedError(fmt::format("shm rank {}: {} was still in flight when the transport closed", ctx_.self.rank, what)));
}

void ShmTransport::close() noexcept {
  if (closed_) return;
  closed_ = true;
  if (counts_.cma + counts_.streamed != 0) {
    DCOMM_INFO("shm rank {}: received {} large messages by cross-memory attach ({} of them helped by the sender), {} "
               "streamed ({} of them finished by a pull after the sender stalled)",
               ctx_.self.rank, counts_.cma, counts_.split, counts_.streamed, counts_.pulled);
  }
  if (mine_.header() != nullptr) mine_.header()->closed.store(1, std::memory_order_release);
  for (auto& [id, m] : sends_) m.op->fail(closed_error("a send"));
  for (auto& [key, s] : in_streams_) s.op->fail(closed_error("a receive"));
  for (auto& [from, s] : in_splits_) {
    split_cancel(peer(from).in.split(), s.gen);  // no new piece from the sender
    s.op->fail(closed_error("a receive"));
  }
  in_splits_.clear();
  helping_.clear();
  sends_.clear();
  streams_.clear();
  in_streams_.clear();
  held_.clear();
  for (auto& p : peers_) p.seg.release();
  mine_.release();
}

}  // namespace dcomm::transport::shm

namespace dcomm::transport {
std::unique_ptr<Transport> make_shm_transport(const TransportContext& ctx) {
  return std::make_unique<shm::ShmTransport>(ctx);
}
}  // namespace dcomm::transport
