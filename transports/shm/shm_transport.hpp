#pragma once
// The shm transport: processes (or threads) of one node.
//   small messages (<= DCOMM_SHM_EAGER_BYTES): copied into the per-pair ring, completed at once;
//   large messages: the sender announces the message and its address (kRts). Once the receive is matched, the
//     receiver picks the protocol of this message (shm_protocol.hpp: measured, per message): it copies it by
//     cross-memory attach - from the front with process_vm_readv while the sender, told by kSplit, copies from the
//     back with process_vm_writev (shm_split.hpp) - and acks (kAck), or asks (kCts) and the sender streams it through the ring in
//     DCOMM_SHM_CHUNK_BYTES pieces (kData), the ring acting as the pipelined buffer (shm_stream.cpp). A stream
//     stalls when the sender does not feed it (descheduled, busy outside dcomm, asleep in its wait); where the
//     receiver may read the sender's memory it then pulls the rest with one process_vm_readv. The sender's op
//     completes at the ack, or - where the receiver cannot pull - when the last piece is in the ring.
// Records that find the ring full wait in a per-peer backlog, so the order per peer never changes.
// Setup and teardown are in shm_transport.cpp, the message path in shm_progress.cpp.

#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "transports/registry.hpp"
#include "transports/shm/shm_protocol.hpp"
#include "transports/shm/shm_segment.hpp"

namespace dcomm::transport::shm {

struct Knobs {
  uint64_t eager_bytes;
  uint64_t chunk_bytes;
  uint64_t ring_bytes;
  bool cma;               ///< DCOMM_SHM_CMA=0: never read a peer's memory
  bool split;             ///< DCOMM_SHM_SPLIT=0: a single-copy message is read by its receiver alone
  ProtocolMode protocol;  ///< DCOMM_SHM_PROTOCOL: auto, or force cma / stream for large messages
  /// From DCOMM_SHM_EAGER_BYTES, DCOMM_SHM_CHUNK_BYTES, DCOMM_SHM_RING_BYTES, DCOMM_SHM_CMA, DCOMM_SHM_PROTOCOL; throws
  /// InvalidUsageError naming the variable when they do not fit together.
  static Knobs from_env();
};

/// How long a receiver that may pull waits for the next piece of a stream before it pulls the rest: one way, and
/// when it is sending large messages too (shm_stream.cpp).
struct PullBounds {
  std::chrono::microseconds one_way{0};
  std::chrono::microseconds two_way{0};
};
PullBounds pull_bounds(const Calibration& cal, uint64_t chunk_bytes, uint64_t ring_bytes);

class ShmTransport final : public Transport {
 public:
  explicit ShmTransport(const TransportContext& ctx);
  ~ShmTransport() override { close(); }

  const char* name() const override { return "shm"; }
  void publish(Store& store) override;
  bool can_connect(const PeerInfo& self, const PeerInfo& peer) const override { return self.host_id == peer.host_id; }
  void connect(Store& store, const std::vector<PeerInfo>& peers, const Deadline& deadline) override;
  void isend(int peer, uint64_t tag, const void* data, std::size_t bytes, const Device& device, OpPtr op) override;
  bool send_now(int peer, uint64_t tag, const void* data, std::size_t bytes) override;
  bool progress(ArrivalSink& sink) override;
  void receive(const Incoming& msg, void* dst, const Device& device, OpPtr op) override;
  void discard(const Incoming& msg) override;
  std::string peer_failure(int peer) override;
  void close() noexcept override;

 private:
  struct Backlogged {
    RecordHeader h;
    std::vector<char> payload;
  };
  struct Peer {
    PeerInfo info;
    Segment seg;  ///< theirs: `out` lives in it
    Ring out;     ///< where this rank writes to them
    Ring in;      ///< where they write to this rank (in this rank's segment)
    std::deque<Backlogged> backlog;
    bool cma = false;  ///< this rank may read their memory
    bool shares_core = false;  ///< they and this rank cannot run at once (shm_protocol.hpp: then no streaming)
    unsigned logged = 0;       ///< the protocols already logged for messages from them (bit per LargeProtocol)
    StallRate stalls;          ///< how often their streams had to be pulled lately
    /// Their last piece of any stream: a sender feeds its streams one after another, so a stream waiting its
    /// turn behind others from the same sender is not stalled while pieces of those keep coming.
    Clock::time_point last_piece{};
    unsigned stall_skips = 0;  ///< messages taken by CMA because of `stalls`, for the probe every kStallProbeEvery
    ProtocolHistory history;   ///< DCOMM_SHM_PROTOCOL=measured: what their large messages cost by each protocol
    uint16_t split_gen = 0;    ///< the generation of the last split read from them (shm_split.hpp)
    bool connected = false;
    /// Whether `out` / `in` are mapped in (Ring::prefault): on first use, not at connect, so that a node of many
    /// ranks commits memory only for the pairs that talk.
    bool out_mapped = false;
    bool in_mapped = false;
  };
  struct OutMessage {  ///< a large send waiting for its ack or being streamed
    int peer;
    const char* data;
    uint64_t bytes;
    uint64_t sent;
    OpPtr op;
    bool ack_at_end = false;  ///< streamed to a receiver that may pull: complete at its kAck, not at the last piece
    bool stopped = false;     ///< the receiver pulls the rest (kStop): write no more pieces
  };
  struct Held {  ///< an announced message whose payload waits for receive() or discard()
    uint64_t token;
    int peer;
    RecordHeader h;
    std::vector<char> owned;  ///< an eager payload, copied out of the ring
  };
  /// The eager message being announced (handle()): its payload still in the ring. token 0: none, or it was
  /// received or discarded during the announcement.
  struct Announcing {
    uint64_t token = 0;
    const char* payload = nullptr;
    uint64_t len = 0;
  };
  struct InSplit {  ///< a split read from a peer whose part is not done yet (one at a time a peer: one board)
    OpPtr op;
    RecordHeader rts;
    char* dst = nullptr;
    uint64_t sender_bytes = 0;  ///< the sender's claims: [bytes - sender_bytes, bytes)
    uint16_t gen = 0;           ///< the board's generation for this message
    Clock::time_point since;    ///< the receive's start, for ProtocolHistory
    bool fall_back = false;     ///< this rank's own read failed (not ESRCH): stream the message once the sender is done
  };
  struct Helping {  ///< a split read this rank's send is helping with (shm_split.hpp): its pieces, one a call
    int to;
    uint64_t msg_id;
    uint64_t addr;  ///< the receiver's buffer
    uint16_t gen;
  };
  struct InStream {  ///< a large receive being streamed into `dst`
    char* dst;
    uint64_t bytes;
    uint64_t got;  ///< pieces arrive in order: [0, got) is in
    OpPtr op;
    uint64_t addr;    ///< the payload in the sender's process, for a pull
    bool ack_at_end;  ///< the kCts promised an ack (this rank may pull)
    bool pulling;     ///< this rank reads the rest itself, a piece per progress call (the sender was told kStop)
    Clock::time_point since;  ///< the kCts: a stall is measured from here or the sender's last piece
    std::chrono::microseconds stall_bound;  ///< no piece for this long: pull the rest (PullBounds)
    bool gone = false;  ///< the sender's buffer is gone (its send aborted: its group failed): nothing left to read
    Clock::time_point first{};  ///< the first piece's arrival (where the kCts promised an ack)
    bool two_way = false;       ///< started with large sends of this rank's own in flight
    double copied = 0;          ///< seconds the sender's copies of the pieces into the ring took (their kData's tag)
  };

  void post(Peer& p, const RecordHeader& h, const void* payload);
  bool flush_backlog(Peer& p);
  bool feed_streams();
  void start_stream(int from, const RecordHeader& rts, void* dst, OpPtr op);
  void on_data(int from, const RecordHeader& h, const char* payload);
  bool pull_stalled();
  bool pull_piece(int from, uint64_t msg_id, InStream& s);
  void finish_stream(int from, uint64_t msg_id, InStream& s, bool pulled);
  bool drain(int peer, ArrivalSink& sink);
  void handle(int peer, const RecordHeader& h, const char* payload, ArrivalSink& sink);
  void ack(int peer, uint64_t msg_id);
  bool split_read(int from, const RecordHeader& rts, char* dst, OpPtr& op);
  bool finish_split(int from);
  bool finish_splits();
  void help_split(int to, const RecordHeader& h);
  bool help_splits();
  bool help_piece(const Helping& w);
  LargeProtocol protocol_for(int from, const RecordHeader& h);
  void log_choices(bool any_cma) const;
  void mark_shared_cores(const std::vector<PeerInfo>& peers);
  std::deque<Held>::iterator find_held(uint64_t token);
  void erase_held(std::deque<Held>::iterator it);
  Peer& peer(int rank) { return peers_[static_cast<std::size_t>(rank)]; }
  std::exception_ptr closed_error(const char* what) const;
  /// A receive from `from` of `bytes` whose sender's process is gone (a cross-memory read got ESRCH).
  std::exception_ptr sender_exited(int from, uint64_t bytes);

  TransportContext ctx_;
  Knobs knobs_;
  Segment mine_;
  std::vector<Peer> peers_;  ///< indexed by world rank; only the connected ones are used
  std::vector<int> connected_;
  std::map<uint64_t, OutMessage> sends_;
  std::deque<uint64_t> streams_;
  /// In token order (tokens only grow): found by binary search and usually taken from an end (a message is
  /// received as it is announced, or in arrival order later), with none of a map's allocation per message.
  std::deque<Held> held_;
  Announcing announcing_;
  std::map<std::pair<int, uint64_t>, InStream> in_streams_;
  std::map<int, InSplit> in_splits_;  ///< by peer
  std::vector<Helping> helping_;
  struct {  ///< large messages received, by protocol, for the log at close (what the choice did in a run)
    uint64_t cma = 0, streamed = 0, pulled = 0, split = 0;
  } counts_;
  PullBounds pull_bounds_;  ///< a stream with no piece for this long is pulled (shm_stream.cpp)
  uint64_t next_msg_id_ = 1;
  uint64_t next_token_ = 1;
  bool split_ = false;  ///< single-copy messages are read by both sides (knobs_.split, and cores enough for all ranks)
  bool closed_ = false;
};

}  // namespace dcomm::transport::shm
