// CudaIpcTransport: device-to-device messages between processes on one node (priority 30, above shm).
//
// Protocol, per message from rank A to rank B (docs/cuda.md has the reasoning):
//   A isend:     export the buffer's allocation (IPC handle, base, offset); put a kMessage record in ring A->B of
//                B's control segment (control_ring.hpp). No payload byte moves yet.
//   B progress:  pops the record and announces it (source A, tag, bytes).
//   B receive:   opens A's allocation (cached per (A, base)) and queues one cudaMemcpyAsync straight from A's buffer
//                into the destination on B's copy stream, then an event.
//   B progress:  once the event fires, completes the receive and puts a kAck record in ring B->A.
//   A progress:  pops the ack and completes the send: A may reuse its buffer.
// Ranks in one process (threads as ranks) send the pointer itself instead of an IPC handle. Memory that legacy IPC
// cannot export (cudaMallocAsync pools and the like) goes through a staging buffer instead (staged_send.hpp).

#include <dcomm/error.hpp>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <deque>
#include <map>
#include <random>
#include <sstream>

#include "common/log.hpp"
#include "transports/cuda_ipc/control_ring.hpp"
#include "transports/cuda_ipc/copy_engine.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"
#include "transports/cuda_ipc/ipc_memory.hpp"
#include "transports/cuda_ipc/staged_receive.hpp"
#include "transports/cuda_ipc/staged_send.hpp"
#include "transports/registry.hpp"

namespace dcomm::transport {
namespace {

using cuda_ipc::ControlRecord;

// Tells apart two ranks in one process (which must not open their own IPC handles) from two processes.
uint64_t process_nonce() {
  static const uint64_t nonce = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  }();
  return nonce;
}

std::string segment_name(const std::string& world_id, int rank) {
  std::string safe;
  for (char c : world_id) safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return fmt::format("/dcomm-{}-cuda_ipc-{}", safe, rank);
}

class CudaIpcTransport final : public Transport {
 public:
  explicit CudaIpcTransport(const TransportContext& ctx)
      : ctx_(ctx), peers_(ctx.world_size),
        staged_out_(ctx.self.rank, ctx.world_size, [this](int peer, const ControlRecord& r) { post_to(peer, r); }),
        staged_in_(ctx.self.rank, [this](int peer, const ControlRecord& r) { post_to(peer, r); }, imports_,
                   copies_) {}
  ~CudaIpcTransport() override { close(); }

  const char* name() const override { return "cuda_ipc"; }

  void publish(Store& store) override {
    own_ = cuda_ipc::ControlSegment::create(segment_name(ctx_.world_id, ctx_.self.rank), ctx_.world_size);
    store.set(std::to_string(ctx_.self.rank), fmt::format("{} {} {}", process_nonce(), cuda::device_count(),
                                                          own_.name()));
  }

  bool can_connect(const PeerInfo& self, const PeerInfo& peer) const override {
    return !self.host_id.empty() && self.host_id == peer.host_id && cuda::device_count() > 0;
  }

  void connect(Store& store, const std::vector<PeerInfo>& peers, const Deadline& deadline) override {
    for (const PeerInfo& info : peers) {
      if (deadline.expired()) {
        throw TimeoutError(fmt::format("cuda_ipc rank {}: connect not done after {} (timeout {}) at rank {}",
                                       ctx_.self.rank, format_duration(deadline.elapsed()),
                                       format_duration(deadline.timeout()), info.rank));
      }
      std::istringstream in(store.get_string(std::to_string(info.rank)));
      uint64_t nonce = 0;
      int devices = 0;
      std::string seg;
      in >> nonce >> devices >> seg;
      if (devices <= 0) {
        throw InvalidUsageError(fmt::format("cuda_ipc rank {}: rank {} on {} sees no CUDA device, so device buffers "
                                            "cannot move between them; check CUDA_VISIBLE_DEVICES on both, or use host "
                                            "buffers", ctx_.self.rank, info.rank, info.hostname));
      }
      Peer& p = peers_.at(static_cast<std::size_t>(info.rank));
      p.info = info;
      p.same_process = nonce == process_nonce();
      p.segment = cuda_ipc::ControlSegment::open(seg, ctx_.world_size);
      p.connected = true;
    }
  }

  bool supports_device(const Device& d) const override { return !d.is_host(); }
  bool receives_into(const Device&) const override { return true; }  // cudaMemcpy reaches host memory too

  void isend(int peer, uint64_t tag, const void* data, std::size_t bytes, const Device& device, OpPtr op) override {
    Peer& p = connected_peer(peer, "isend");
    if (device.is_host() && bytes > 0) {
      throw InvalidUsageError(fmt::format("cuda_ipc rank {}: send to rank {} of {} from host memory; cuda_ipc "
                                          "carries device buffers only (the mesh sends host memory over shm)",
                                          ctx_.self.rank, peer, format_bytes(bytes)));
    }
    ControlRecord rec;
    rec.kind = ControlRecord::kMessage;
    rec.tag = tag;
    rec.bytes = bytes;
    if (bytes > 0) {
      cuda::DeviceGuard guard(device.index);
      if (!p.same_process && !cuda_ipc::ipc_exportable(data)) {
        staged_out_.add(peer, p.next_seq, data, bytes, device.index);
        rec.kind = ControlRecord::kStaged;
      } else {
        cuda_ipc::ExportedRange r = cuda_ipc::export_range(data, !p.same_process);
        rec.base = r.base;
        rec.offset = r.offset;
        rec.handle = r.handle;
      }
    }
    rec.seq = p.next_seq++;  // only once nothing can fail any more
    p.sends.emplace(rec.seq, SendState{std::move(op), bytes});
    post(p, rec);
  }

  bool progress(ArrivalSink& sink) override {
    bool any = false;
    for (std::size_t r = 0; r < peers_.size(); ++r) {
      Peer& p = peers_[r];
      if (!p.connected) continue;
      any |= flush(p);
      ControlRecord rec;
      while (cuda_ipc::ring_pop(own_.ring(static_cast<int>(r)), &rec)) {
        any = true;
        dispatch(static_cast<int>(r), rec, sink);
      }
    }
    any |= staged_out_.progress([this](int peer, uint64_t seq, std::exception_ptr error) {
      Peer& p = peers_.at(static_cast<std::size_t>(peer));
      auto it = p.sends.find(seq);
      if (it == p.sends.end()) return;
      it->second.op->fail(std::move(error));
      p.sends.erase(it);
    });
    any |= copies_.poll([this](const cuda_ipc::FinishedCopy& f) {
      if (f.chunk) {
        staged_in_.copied(f, f.error ? copy_failure(f) : nullptr);
        return;
      }
      if (f.error) {
        f.op->fail(copy_failure(f));
      } else {
        f.op->complete(f.bytes);
      }
      ack(peers_.at(static_cast<std::size_t>(f.peer)), f.seq, f.error != nullptr);
    });
    return any;
  }

  void receive(const Incoming& msg, void* dst, const Device& device, OpPtr op) override {
    Pending m = take(msg);
    Peer& p = peers_.at(static_cast<std::size_t>(m.peer));
    if (m.rec.bytes == 0) {
      op->complete(0);
      ack(p, m.rec.seq, false);
      return;
    }
    try {
      const int dev = device.is_host() ? current_device() : device.index;
      if (m.rec.kind == ControlRecord::kStaged) return staged_in_.start(m.peer, m.rec.seq, dst, m.rec.bytes, dev, op);
      cuda::DeviceGuard guard(dev);
      void* base = p.same_process ? reinterpret_cast<void*>(m.rec.base) : imports_.open(m.peer, m.rec.base,
                                                                                          m.rec.handle);
      const void* src = static_cast<const char*>(base) + m.rec.offset;
      copies_.start(dev, dst, src, m.rec.bytes,
                    cuda_ipc::FinishedCopy{m.peer, m.rec.seq, m.rec.bytes, op, nullptr, false, 0},
                    fmt::format("cuda_ipc rank {}: copy of {} from rank {}", ctx_.self.rank,
                                format_bytes(m.rec.bytes), m.peer));
    } catch (...) {
      op->fail(std::current_exception());
      ack(p, m.rec.seq, true);  // the sender must not wait for a copy that will never happen
    }
  }

  void discard(const Incoming& msg) override {
    Pending m = take(msg);
    ack(peers_.at(static_cast<std::size_t>(m.peer)), m.rec.seq, false);
  }

  std::string peer_failure(int peer) override {
    const Peer& p = peers_.at(static_cast<std::size_t>(peer));
    if (!p.connected || p.same_process || p.info.pid <= 0) return {};
    if (kill(p.info.pid, 0) != 0 && errno == ESRCH) {
      return fmt::format("process {} on host {} exited", p.info.pid, p.info.hostname);
    }
    return {};
  }

  void close() noexcept override {
    for (Peer& p : peers_) {
      for (auto& [seq, send] : p.sends) {
        send.op->fail(std::make_exception_ptr(AbortedError(fmt::format(
            "cuda_ipc rank {}: send to rank {} aborted: the transport closed first", ctx_.self.rank, p.info.rank))));
      }
      p.sends.clear();
      p.segment = {};
      p.connected = false;
    }
    copies_.close();
    staged_in_.close();
    staged_out_.close();
    imports_.close_all();
    own_ = {};
  }

 private:
  struct SendState {
    OpPtr op;
    std::size_t bytes;
  };
  struct Peer {
    PeerInfo info;
    bool connected = false;
    bool same_process = false;
    cuda_ipc::ControlSegment segment;      // the peer's: its ring[self] is where records to it go
    std::deque<ControlRecord> backlog;     // records waiting for room in that ring
    uint64_t next_seq = 0;
    std::map<uint64_t, SendState> sends;   // sends waiting for their ack, by seq
  };
  struct Pending {
    int peer;
    ControlRecord rec;
  };

  Peer& connected_peer(int peer, const char* what) {
    if (peer < 0 || peer >= ctx_.world_size || !peers_[static_cast<std::size_t>(peer)].connected) {
      throw InvalidUsageError(fmt::format("cuda_ipc rank {}: {} to rank {}, which this transport is not connected "
                                          "to (it only reaches ranks on host {})", ctx_.self.rank, what, peer,
                                          ctx_.self.hostname));
    }
    return peers_[static_cast<std::size_t>(peer)];
  }

  static int current_device() {
    int d = 0;
    cuda::check(cudaGetDevice(&d), "cudaGetDevice");
    return d;
  }

  Pending take(const Incoming& msg) {
    auto it = incoming_.find(msg.token);
    if (it == incoming_.end()) {
      throw Error(ErrorCode::kInternal, fmt::format("cuda_ipc rank {}: message token {} from rank {} is unknown "
                                                    "(received or discarded twice)", ctx_.self.rank, msg.token,
                                                    msg.source));
    }
    Pending m = it->second;
    incoming_.erase(it);
    return m;
  }

  // Where progress() sends each record it pops: messages to the mesh, the rest to the side they concern.
  void dispatch(int peer, const ControlRecord& rec, ArrivalSink& sink) {
    switch (rec.kind) {
      case ControlRecord::kAck:
        return acked(peers_.at(static_cast<std::size_t>(peer)), rec);
      case ControlRecord::kGo:
        return staged_out_.go(peer, rec.seq);
      case ControlRecord::kSlotFree:
        return staged_out_.slot_free(peer, rec.offset);
      case ControlRecord::kChunk:
        return staged_in_.chunk(peer, rec);
      case ControlRecord::kCancel:
        return staged_in_.cancel(peer, rec.seq);
      case ControlRecord::kMessage:
      case ControlRecord::kStaged: {
        const uint64_t token = next_token_++;
        incoming_.emplace(token, Pending{peer, rec});
        return sink.arrived(*this, Incoming{peer, rec.tag, rec.bytes, token});
      }
    }
    DCOMM_WARN("cuda_ipc rank {}: record of unknown kind {} from rank {} dropped; do both ranks run the same dcomm?",
               ctx_.self.rank, static_cast<uint32_t>(rec.kind), peer);
  }

  void post_to(int peer, const ControlRecord& rec) { post(peers_.at(static_cast<std::size_t>(peer)), rec); }

  // Records go out in order: straight into the ring unless earlier ones still wait for room.
  void post(Peer& p, const ControlRecord& rec) {
    if (!p.backlog.empty() || !cuda_ipc::ring_push(p.segment.ring(ctx_.self.rank), rec)) p.backlog.push_back(rec);
  }

  bool flush(Peer& p) {
    bool any = false;
    while (!p.backlog.empty() && cuda_ipc::ring_push(p.segment.ring(ctx_.self.rank), p.backlog.front())) {
      p.backlog.pop_front();
      any = true;
    }
    return any;
  }

  // A copy out of a peer's memory that failed because the peer died is the peer's failure, not CUDA's: report it
  // as such, naming the peer, with the CUDA error after it.
  std::exception_ptr copy_failure(const cuda_ipc::FinishedCopy& f) {
    std::string dead = peer_failure(f.peer);
    if (dead.empty()) return f.error;
    std::string cuda_error;
    try {
      std::rethrow_exception(f.error);
    } catch (const std::exception& e) {
      cuda_error = e.what();
    }
    return std::make_exception_ptr(RemoteError(fmt::format(
        "cuda_ipc rank {}: rank {} is gone ({}) while its {} were being copied: {}", ctx_.self.rank, f.peer, dead,
        format_bytes(f.bytes), cuda_error)));
  }

  void ack(Peer& p, uint64_t seq, bool failed) {
    ControlRecord rec;
    rec.kind = ControlRecord::kAck;
    rec.seq = seq;
    rec.failed = failed ? 1 : 0;
    post(p, rec);
  }

  void acked(Peer& p, const ControlRecord& rec) {
    auto it = p.sends.find(rec.seq);
    if (it == p.sends.end()) {
      DCOMM_WARN("cuda_ipc rank {}: ack for unknown message {} from rank {}", ctx_.self.rank, rec.seq, p.info.rank);
      return;
    }
    SendState send = std::move(it->second);
    p.sends.erase(it);
    staged_out_.forget(p.info.rank, rec.seq);  // a staged send streams no more chunks
    if (rec.failed) {
      send.op->fail(std::make_exception_ptr(RemoteError(fmt::format(
          "cuda_ipc rank {}: rank {} on {} could not copy the message out of this rank's device memory - check "
          "rank {}'s log", ctx_.self.rank, p.info.rank, p.info.hostname, p.info.rank))));
    } else {
      send.op->complete(send.bytes);
    }
  }

  TransportContext ctx_;
  std::vector<Peer> peers_;
  cuda_ipc::ControlSegment own_;  // ring[s] holds what rank s sent here
  std::map<uint64_t, Pending> incoming_;
  uint64_t next_token_ = 1;
  cuda_ipc::ImportCache imports_;
  cuda_ipc::CopyEngine copies_;
  cuda_ipc::StagedSender staged_out_;   // after the members its callbacks use
  cuda_ipc::StagedReceiver staged_in_;  // after imports_ and copies_, which it refers to
};

}  // namespace

std::unique_ptr<Transport> make_cuda_ipc_transport(const TransportContext& ctx) {
  return std::make_unique<CudaIpcTransport>(ctx);
}

}  // namespace dcomm::transport
