#pragma once
// Mesh: this rank's connections to every rank of the world, one transport per peer (the best that can connect:
// cuda_ipc > shm > ucx, or the one DCOMM_TRANSPORT forces), and the one matching engine above them.
//
// Matching is by (source, tag), in order per (source, tag), with kAnySource matching any sender. Receives posted
// before the message arrives take it straight into the user's buffer; messages that arrive first wait in the
// unexpected list (their payload held by the transport) until a receive is posted.
//
// Failure: wait() is bounded by its deadline and watches the peer's liveness (rate-limited), so a dead peer fails
// the wait within a few seconds naming the peer's rank and host, the op and the bytes. The first failure poisons
// the mesh: every later call fails at once, repeating that first cause.

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <dcomm/store.hpp>
#include <dcomm/types.hpp>

#include "common/deadline.hpp"
#include "transports/staging/stager.hpp"
#include "transports/transport.hpp"

namespace dcomm::transport {

/// A point-to-point request as the matching layer sees it.
struct Request {
  enum class Kind { kSend, kRecv };
  Kind kind = Kind::kSend;
  int peer = -1;              ///< destination, or the source asked for (kAnySource)
  uint64_t tag = 0;
  void* data = nullptr;       ///< receive buffer (sends keep their pointer in the transport)
  Device device{};            ///< where `data` lives
  std::size_t capacity = 0;   ///< bytes sent, or room in the receive buffer
  int source = -1;            ///< who sent it, once matched
  std::size_t received = 0;   ///< bytes received, once done
  bool matched = false;       ///< a receive that has been paired with a message
  bool cancelled = false;
  /// Its completion record, which lives in the request itself (one allocation per request); transports get an
  /// OpPtr that shares the request's ownership (op_ptr()).
  Op op_storage;
  Op* op = &op_storage;
  Request() = default;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  Transport* transport = nullptr;  ///< the transport that carries it, once known
};
using RequestPtr = std::shared_ptr<Request>;

/// What a wait is for, the first words of its errors ("allreduce[ring] rank 2/4"): a string, or a function that
/// writes it only when an error needs it (a point-to-point message's wait, where putting the words together on
/// every message cost more than the rest of the message's path).
class WaitWhat {
 public:
  WaitWhat(std::string_view text) : text_(text) {}  // NOLINT: a string is the usual form
  WaitWhat(const std::string& text) : text_(text) {}  // NOLINT
  WaitWhat(const char* text) : text_(text) {}  // NOLINT
  WaitWhat(std::string (*make)(const void* arg), const void* arg) : make_(make), arg_(arg) {}
  std::string str() const { return make_ != nullptr ? make_(arg_) : std::string(text_); }

 private:
  std::string_view text_;
  std::string (*make_)(const void*) = nullptr;
  const void* arg_ = nullptr;
};

/// The OpPtr a transport keeps while the request is in flight: it keeps the whole request alive.
inline OpPtr op_ptr(const RequestPtr& r) { return OpPtr(r, r->op); }

struct MeshOptions {
  Duration timeout = std::chrono::seconds(300);
  std::string forced_transport;        ///< empty: DCOMM_TRANSPORT from the environment, else the best per peer
  Duration liveness_interval = std::chrono::milliseconds(200);  ///< how often waits check peer liveness
  /// Copies device buffers to and from pinned host chunks, for peers only a host transport reaches; null: the
  /// build's (staging::default_stager(): CUDA's, or none).
  std::shared_ptr<staging::Stager> stager;
  /// Where the world's root cause is recorded (rendezvous/failure_record.hpp): read by waits to blame the rank
  /// that failed first, written when this rank sees a peer's process exit. Null: errors name what this rank saw.
  std::shared_ptr<Store> failure_store;
};

class Mesh {
 public:
  /// Collective over the world: creates the transports, publishes this rank's PeerInfo and connection details
  /// in `store`, reads every peer's, and connects. `self.rank` and `world_size` come from rendezvous.
  static std::shared_ptr<Mesh> create(std::shared_ptr<Store> store, const PeerInfo& self, int world_size,
                                      const MeshOptions& options = {});
  virtual ~Mesh() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const PeerInfo& peer(int rank) const = 0;
  /// The name of the transport that carries traffic to `peer` ("self" for this rank).
  virtual const char* transport_name(int peer) const = 0;

  /// `device` says where the memory lives; device memory goes over a transport that supports it (cuda_ipc),
  /// or is staged through host memory.
  RequestPtr isend(int peer, uint64_t tag, const void* data, std::size_t bytes, const Device& device = Device::host()) {
    auto r = std::make_shared<Request>();
    isend(r, peer, tag, data, bytes, device);
    return r;
  }
  /// `peer` may be kAnySource.
  RequestPtr irecv(int peer, uint64_t tag, void* data, std::size_t capacity, const Device& device = Device::host()) {
    auto r = std::make_shared<Request>();
    irecv(r, peer, tag, data, capacity, device);
    return r;
  }
  /// The same into `r`, a fresh request the caller made: one that shares an allocation with the caller's own state
  /// (a process group's handle and its request are one block: one allocation a message, not two).
  virtual void isend(const RequestPtr& r, int peer, uint64_t tag, const void* data, std::size_t bytes,
                     const Device& device) = 0;
  virtual void irecv(const RequestPtr& r, int peer, uint64_t tag, void* data, std::size_t capacity,
                     const Device& device) = 0;
  /// A send of host memory finished on the spot when its transport can hand it over whole at once (Transport::
  /// send_now: an eager shm message): returns true, and the message is sent exactly as by isend, in the same order.
  /// Returns false, having done nothing, when it must go by isend (large, a staged send holding up a (peer, tag),
  /// this rank, a transport without it). Throws like isend.
  virtual bool send_now(int peer, uint64_t tag, const void* data, std::size_t bytes) = 0;
  /// Drives progress once; returns whether the request has finished (done, failed or cancelled).
  virtual bool test(Request& r) = 0;
  /// Waits for the request; throws its failure, TimeoutError at the deadline, RemoteError when its peer dies.
  /// `what` starts every error message: "allreduce[ring] rank 2/4".
  virtual void wait(Request& r, const Deadline& deadline, const WaitWhat& what) = 0;
  /// Waits until `ready(arg)` holds, for memory a peer writes directly (a shared-memory slot, collectives/slots.hpp):
  /// polls it, drives the mesh's progress every few polls (so messages this rank still owes keep moving), checks
  /// `peer`'s liveness every liveness_interval and fails like wait() - RemoteError naming the peer when it dies,
  /// TimeoutError at the deadline - poisoning the mesh. `awaited(arg)` names what is waited for, for errors only
  /// ("the shared-memory slot of rank 1 for call #42 of this group").
  virtual void wait_until(bool (*ready)(const void* arg), std::string (*awaited)(const void* arg), const void* arg,
                          int peer, const Deadline& deadline, std::string_view what) = 0;
  /// Withdraws a receive that has not been matched yet; returns false when it was already matched.
  virtual bool cancel(Request& r) = 0;
  /// Drives progress of every transport once.
  virtual void progress() = 0;

  /// Marks the mesh failed; later calls throw `cause` at once.
  virtual void poison(std::exception_ptr cause) noexcept = 0;
  virtual std::exception_ptr poisoned() const = 0;
  /// Whether the mesh is poisoned (or closed): poisoned() without its exception, inline - every collective call
  /// asks it first.
  bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  /// Closes every transport. Idempotent; never throws.
  virtual void close() noexcept = 0;

 protected:
  std::atomic<bool> failed_{false};  ///< set, with release, once the mesh is poisoned or closed (failed())
};

}  // namespace dcomm::transport
