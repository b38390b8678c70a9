#pragma once
/// The process group: point-to-point and collective communication among a set of ranks.
///
/// Every operation returns a Work handle. Unless `async_op` is set, the call waits before returning and the
/// handle is already complete; with `async_op`, the call returns at once and operations on one group run in
/// the order they were issued. A failure (timeout, dead peer) poisons the group: later calls fail at once with
/// the first cause; shrink() then gives the survivors a new group of themselves.

#include <memory>
#include <string>
#include <vector>

#include <dcomm/init.hpp>
#include <dcomm/types.hpp>
#include <dcomm/work.hpp>

namespace dcomm {

/// The collectives, for algorithm selection and explain().
enum class Collective : uint8_t {
  kAllReduce, kBroadcast, kReduce, kScatter, kGather, kAllGather, kReduceScatter, kAllToAll, kBarrier
};
const char* to_string(Collective c) noexcept;  ///< "all_reduce", "broadcast", ...
bool parse_collective(const std::string& name, Collective* out) noexcept;
/// The algorithms this build has for `c`: the names CollectiveOptions::algorithm, set_algorithm() and DCOMM_ALGO
/// accept, in the collectives layer's table order.
std::vector<std::string> algorithms(Collective c);

/// Per-call options.
/// Every field has a default member initializer, so designated initializers ({.async_op = true}) that name only
/// some fields compile warning-free under -Wextra (the same holds for P2POptions, InitOptions, TcpStoreOptions).
struct CollectiveOptions {
  /// An algorithm by name ("ring", "tree", ...); empty: the group's choice (DCOMM_ALGO, else the cost model).
  std::string algorithm{};
  /// kDefaultTimeout: the group's timeout.
  Duration timeout = kDefaultTimeout;
  /// Return at once; the handle completes later.
  bool async_op = false;
  /// CUDA buffers: a cudaStream_t whose queued work the collective waits for (through an event, without
  /// blocking the host). Null: the current device's default stream.
  void* stream = nullptr;
};

struct P2POptions {
  Duration timeout = kDefaultTimeout;
  bool async_op = false;
  /// CUDA buffers: a cudaStream_t whose queued work the send or recv waits for on the host before it is posted.
  /// Null: the current device's default stream.
  void* stream = nullptr;
};

class ProcessGroup;

/// How shrink() waits.
struct ShrinkOptions {
  /// Bound on the whole shrink; kDefaultTimeout: the group's timeout.
  Duration timeout = kDefaultTimeout;
  /// How long the survivors wait for a rank that has neither joined the shrink nor is known dead (stopped, hung,
  /// on a host where nothing saw it die); it is then left out. kDefaultTimeout: 30 s (or the timeout if shorter).
  Duration join_window = kDefaultTimeout;
};

/// What shrink() agreed.
struct ShrinkResult {
  std::shared_ptr<ProcessGroup> group;  ///< the survivors, renumbered in the old order
  std::vector<int> failed;              ///< ranks of the old group left out, ascending (the same on every survivor)
  std::vector<int> survivors;           ///< survivors[new rank] = its rank in the old group
  int rounds = 1;                       ///< agreement rounds (more than 1: a member failed during the shrink)
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// This process's identity in the world (the world rank, not the group rank).
  virtual const Identity& identity() const = 0;
  /// The group's store (prefixed for this group).
  virtual std::shared_ptr<Store> store() const = 0;
  virtual Duration timeout() const = 0;

  // ---- Point-to-point. Tags are non-negative ints; receives match by (source, tag) in order.
  virtual WorkPtr send(const Buffer& buf, int dst, int tag = 0, const P2POptions& opts = {}) = 0;
  /// `src` may be kAnySource; the handle's source() tells who sent. A message larger than `buf` fails the
  /// receive (memory past the buffer is never written).
  virtual WorkPtr recv(const Buffer& buf, int src, int tag = 0, const P2POptions& opts = {}) = 0;
  WorkPtr isend(const Buffer& buf, int dst, int tag = 0) { return send(buf, dst, tag, {kDefaultTimeout, true, nullptr}); }
  WorkPtr irecv(const Buffer& buf, int src, int tag = 0) { return recv(buf, src, tag, {kDefaultTimeout, true, nullptr}); }

  // ---- Collectives. Out-of-place forms take `send` and `recv`; in-place forms one buffer.
  virtual WorkPtr all_reduce(const Buffer& send, const Buffer& recv, Reduction red = {},
                             const CollectiveOptions& opts = {}) = 0;
  WorkPtr all_reduce(const Buffer& buf, Reduction red = {}, const CollectiveOptions& opts = {}) {
    return all_reduce(buf, buf, red, opts);
  }
  virtual WorkPtr broadcast(const Buffer& buf, int root, const CollectiveOptions& opts = {}) = 0;
  /// `recv` matters on the root only.
  virtual WorkPtr reduce(const Buffer& send, const Buffer& recv, int root, Reduction red = {},
                         const CollectiveOptions& opts = {}) = 0;
  /// The root's `send` holds size() * recv.count elements, rank i's block at i * recv.count.
  virtual WorkPtr scatter(const Buffer& send, const Buffer& recv, int root, const CollectiveOptions& opts = {}) = 0;
  /// The root's `send` holds counts[i] elements for rank i at displs[i] (empty displs: packed in rank order).
  virtual WorkPtr scatterv(const Buffer& send, const std::vector<std::size_t>& counts,
                           const std::vector<std::size_t>& displs, const Buffer& recv, int root,
                           const CollectiveOptions& opts = {}) = 0;
  /// The root's `recv` gets size() * send.count elements, rank i's at i * send.count.
  virtual WorkPtr gather(const Buffer& send, const Buffer& recv, int root, const CollectiveOptions& opts = {}) = 0;
  virtual WorkPtr gatherv(const Buffer& send, const Buffer& recv, const std::vector<std::size_t>& counts,
                          const std::vector<std::size_t>& displs, int root, const CollectiveOptions& opts = {}) = 0;
  /// `recv` gets size() * send.count elements, rank i's at i * send.count.
  virtual WorkPtr all_gather(const Buffer& send, const Buffer& recv, const CollectiveOptions& opts = {}) = 0;
  /// `send` holds size() * recv.count elements; rank i gets the reduction of every rank's block i.
  virtual WorkPtr reduce_scatter(const Buffer& send, const Buffer& recv, Reduction red = {},
                                 const CollectiveOptions& opts = {}) = 0;
  /// `send` and `recv` hold size() blocks of count / size() elements; block j of rank i goes to block i of rank j.
  virtual WorkPtr all_to_all(const Buffer& send, const Buffer& recv, const CollectiveOptions& opts = {}) = 0;
  virtual WorkPtr all_to_all_v(const Buffer& send, const std::vector<std::size_t>& send_counts,
                               const std::vector<std::size_t>& send_displs, const Buffer& recv,
                               const std::vector<std::size_t>& recv_counts,
                               const std::vector<std::size_t>& recv_displs, const CollectiveOptions& opts = {}) = 0;
  virtual WorkPtr barrier(const CollectiveOptions& opts = {}) = 0;

  // ---- Subgroups. Collective over this group; each subgroup has its own tag space.
  /// Ranks with equal color form a group, ordered by (key, rank). A negative color joins no group (returns null).
  virtual std::shared_ptr<ProcessGroup> split(int color, int key) = 0;
  /// A group of the given ranks of this group (every rank of this group must call it; non-members get null).
  virtual std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) = 0;
  /// The same group made by its members alone (the other ranks need not call it): they agree on it through
  /// `rendezvous`, a store they share that no other group's creation uses (torch's per-group store, for one), and
  /// must list the same ranks (else InvalidUsageError on the members that differ). Non-members get null.
  virtual std::shared_ptr<ProcessGroup> new_group_of_members(const std::vector<int>& ranks, Store& rendezvous) = 0;

  // ---- Algorithm selection.
  /// Forces an algorithm for a collective on this group ("" returns to the cost model).
  virtual void set_algorithm(Collective c, const std::string& name) = 0;
  /// Each candidate's predicted time for `bytes` on this group, and the choice, as text; `device`: for a call on
  /// buffers there (device calls are priced with the device's costs and run only the rows that handle them).
  virtual std::string explain(Collective c, std::size_t bytes, Device device = Device::host()) const = 0;

  // ---- Recovery (docs/errors.md, "Recovery").
  /// After a failure: the survivors agree through the store on who failed (the same set on every survivor) and
  /// get a new group of the survivors, ranks renumbered in the old order, over a fresh mesh (nothing of the old
  /// group reaches it). Every survivor must call it; this group's pending work fails and the group becomes
  /// unusable. Only a world group (from init() or an earlier shrink) shrinks: rebuild subgroups from the result.
  /// Throws ExcludedError on a rank the others left out (it joined after they agreed), TimeoutError at the bound.
  /// (A ProcessGroup that is not dcomm's own, such as a test double, throws InvalidUsageError.)
  virtual ShrinkResult shrink(const ShrinkOptions& opts = {});

  /// Fails every pending operation with AbortedError and poisons the group. Never throws.
  virtual void abort() noexcept = 0;
};

using ProcessGroupPtr = std::shared_ptr<ProcessGroup>;

}  // namespace dcomm
