#pragma once
// The one small interface every transport implements. A transport moves tagged byte messages between this
// rank and its peers; matching receives to messages (by source and tag, any-source, cancellation) happens once,
// above all transports, in Mesh. That split is what lets one any-source receive span shm and ucx peers.
//
// The life of a message:
//   sender: isend(peer, tag, data, bytes, device, op)        -> op completes once `data` may be reused
//   receiver: progress(sink) announces the header      -> sink.arrived(Incoming{source, tag, bytes, token})
//             Mesh matches it to a posted receive      -> receive(msg, dst, dev, op) pulls the payload into dst
//             or keeps it as unexpected until one is posted (the transport holds the payload meanwhile),
//             or rejects it (buffer too small)         -> discard(msg)
// Per peer, headers are announced in the order the peer sent them. receive() and discard() may be called from
// inside sink.arrived() or any time later, from the thread that calls progress().
//
// Threading: Mesh serialises every call into a transport under its own lock; a transport needs no locking of
// its own unless it runs threads of its own.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>

#include "common/deadline.hpp"

namespace dcomm::transport {

/// Tags travel as 44-bit values (UCX packs the source rank into the other 20 bits of its 64-bit tag).
inline constexpr int kTagBits = 44;
inline constexpr uint64_t kMaxTag = (uint64_t{1} << kTagBits) - 1;
/// The top tag bit marks the messages of a staged device buffer (transports/staging); Mesh users get the rest.
inline constexpr uint64_t kStagedBit = uint64_t{1} << (kTagBits - 1);
inline constexpr uint64_t kMaxMeshTag = kStagedBit - 1;

/// What rendezvous tells every transport about a rank.
struct PeerInfo {
  int rank = -1;
  int local_rank = -1;
  int node_rank = -1;
  std::string host_id;   ///< equal host ids share a node (shared memory, CUDA IPC)
  std::string hostname;  ///< for error messages
  int pid = 0;
  std::vector<int> cpus;  ///< the cores this process may run on (its affinity when it joined), ascending
};

/// The completion record of one transport operation. The transport completes it inside progress() (or at once).
class Op {
 public:
  enum class State : int { kPending, kDone, kFailed };
  State state() const { return state_.load(std::memory_order_acquire); }
  bool done() const { return state() != State::kPending; }
  void complete(std::size_t bytes) {
    bytes_ = bytes;
    state_.store(State::kDone, std::memory_order_release);
  }
  void fail(std::exception_ptr e) {
    error_ = std::move(e);
    state_.store(State::kFailed, std::memory_order_release);
  }
  std::exception_ptr error() const { return error_; }
  std::size_t bytes() const { return bytes_; }

 private:
  std::atomic<State> state_{State::kPending};
  std::exception_ptr error_;
  std::size_t bytes_ = 0;
};
using OpPtr = std::shared_ptr<Op>;

/// A message whose header has arrived and whose payload waits for a destination.
struct Incoming {
  int source = -1;
  uint64_t tag = 0;
  std::size_t bytes = 0;
  uint64_t token = 0;  ///< the transport's own handle of the message
  bool staged = false; ///< announced by StagedTransport for a staged device buffer: `token` is its own
};

/// An exception of the Error subclass that `code` names, carrying `message`.
std::exception_ptr make_error(ErrorCode code, const std::string& message);

/// Where progress() announces arrivals.
class ArrivalSink {
 public:
  virtual ~ArrivalSink() = default;
  virtual void arrived(class Transport& from, const Incoming& msg) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  /// "loopback", "shm", "ucx", "cuda_ipc".
  virtual const char* name() const = 0;
  /// Publishes this rank's connection details in `store` (already prefixed for this world and transport).
  virtual void publish(Store& store) = 0;
  /// Whether this transport can reach `peer` from `self` (shm: same host id).
  virtual bool can_connect(const PeerInfo& self, const PeerInfo& peer) const = 0;
  /// Connects to `peers` (the ones this transport was chosen for), reading their details from `store`.
  virtual void connect(Store& store, const std::vector<PeerInfo>& peers, const Deadline& deadline) = 0;
  /// Whether this transport can move memory on `device` (host-only transports return d.is_host()).
  virtual bool supports_device(const Device& d) const { return d.is_host(); }
  /// Whether a message that arrived over this transport can be received into memory on `d`. The sender's side
  /// chose the transport by its own buffer, so this can be wider than supports_device: cuda_ipc sends device
  /// buffers only, but copies them into host memory as well.
  virtual bool receives_into(const Device& d) const { return supports_device(d); }
  /// Starts sending; `op` completes when `data` may be reused (or fails naming the peer).
  virtual void isend(int peer, uint64_t tag, const void* data, std::size_t bytes, const Device& device, OpPtr op) = 0;
  /// Sends a host message now if the transport can take it whole without waiting for anything, in order with
  /// everything sent to `peer` before (shm: an eager message, written into the ring or copied into the peer's
  /// backlog): returns true when that is done and `data` may be reused - the message then counts exactly as an
  /// isend whose op completed at once. Returns false, having done nothing, when the caller must isend it. Lets a
  /// small send skip its op and request (Mesh::send_now).
  virtual bool send_now(int peer, uint64_t tag, const void* data, std::size_t bytes) {
    (void)peer, (void)tag, (void)data, (void)bytes;
    return false;
  }
  /// Advances everything in flight and announces newly arrived headers to `sink`. Returns whether anything
  /// happened (so callers can back off when nothing did).
  virtual bool progress(ArrivalSink& sink) = 0;
  /// Pulls an announced message's payload into `dst` (room for msg.bytes); `op` completes when it is there.
  virtual void receive(const Incoming& msg, void* dst, const Device& device, OpPtr op) = 0;
  /// Drops an announced message's payload; the sender's op still completes.
  virtual void discard(const Incoming& msg) = 0;
  /// Why `peer` is unreachable ("process 1234 on host a exited"), or empty while it looks alive.
  /// Mesh calls this from its wait loop, rate-limited, so it may cost a syscall.
  virtual std::string peer_failure(int peer) = 0;
  /// Releases everything. No calls follow. Never throws.
  virtual void close() noexcept = 0;
  /// Called before close() when the world has failed: nothing in flight needs delivering any more, so close()
  /// must not wait on any peer (a stopped peer would hold it for its whole flush budget).
  virtual void abandon() noexcept {}
};

}  // namespace dcomm::transport
