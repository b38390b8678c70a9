#pragma once
// The process group: a GroupView of the world's mesh, the collectives Engine for that view, and an Executor that
// runs the group's collectives in issue order. Subgroups share the mesh and take their own tag context.

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <dcomm/process_group.hpp>

#include "collectives/engine.hpp"
#include "rendezvous/bootstrap.hpp"
#include "runtime/cuda/stream_order.hpp"
#include "runtime/executor.hpp"
#include "runtime/flight_recorder.hpp"
#include "runtime/hang_report.hpp"
#include "runtime/work_impl.hpp"

namespace dcomm::runtime {

/// What every group of one world shares: the identity, the world store, the mesh, and a store server when this
/// process hosts it.
struct World {
  Identity identity;
  std::shared_ptr<Store> store;
  std::unique_ptr<TcpStoreServer> server;
  std::shared_ptr<transport::Mesh> mesh;
  Duration timeout{};
  /// Where the root cause and the flight recorder's reports go (rdzv::Bootstrap::failure_store); may be null.
  std::shared_ptr<Store> failure_store;
  std::shared_ptr<FlightRecorders> recorders = std::make_shared<FlightRecorders>();
  std::unique_ptr<HangResponder> responder;
  // Recovery (runtime/shrink.cpp).
  std::string transport;                   ///< the forced transport (InitOptions::transport), for a shrunk mesh
  std::vector<int> launch_ranks;           ///< launch_ranks[rank]: the rank dcomm-run started it as
  std::shared_ptr<Store> launch_failures;  ///< the launch's failure store (dcomm-run's death records); may be null
  std::shared_ptr<World> parent;           ///< the world this one was shrunk from (it holds the store server)
  std::atomic<bool> shrunk{false};         ///< shrink() has been called on this world
  ~World() {
    responder.reset();  // before the store it talks to goes away
    if (mesh) mesh->close();
    if (server) server->stop();
  }
};

class ProcessGroupImpl : public ProcessGroup, public std::enable_shared_from_this<ProcessGroupImpl> {
 public:
  ProcessGroupImpl(std::shared_ptr<World> world, coll::GroupView view, std::shared_ptr<Store> store);
  ~ProcessGroupImpl() override;

  int rank() const override { return view_.rank; }
  int size() const override { return view_.size; }
  const Identity& identity() const override { return world_->identity; }
  std::shared_ptr<Store> store() const override { return store_; }
  Duration timeout() const override { return world_->timeout; }

  WorkPtr send(const Buffer& buf, int dst, int tag, const P2POptions& opts) override;
  WorkPtr recv(const Buffer& buf, int src, int tag, const P2POptions& opts) override;

  WorkPtr all_reduce(const Buffer& send, const Buffer& recv, Reduction red, const CollectiveOptions& opts) override;
  WorkPtr broadcast(const Buffer& buf, int root, const CollectiveOptions& opts) override;
  WorkPtr reduce(const Buffer& send, const Buffer& recv, int root, Reduction red,
                 const CollectiveOptions& opts) override;
  WorkPtr scatter(const Buffer& send, const Buffer& recv, int root, const CollectiveOptions& opts) override;
  WorkPtr scatterv(const Buffer& send, const std::vector<std::size_t>& counts, const std::vector<std::size_t>& displs,
                   const Buffer& recv, int root, const CollectiveOptions& opts) override;
  WorkPtr gather(const Buffer& send, const Buffer& recv, int root, const CollectiveOptions& opts) override;
  WorkPtr gatherv(const Buffer& send, const Buffer& recv, const std::vector<std::size_t>& counts,
                  const std::vector<std::size_t>& displs, int root, const CollectiveOptions& opts) override;
  WorkPtr all_gather(const Buffer& send, const Buffer& recv, const CollectiveOptions& opts) override;
  WorkPtr reduce_scatter(const Buffer& send, const Buffer& recv, Reduction red,
                         const CollectiveOptions& opts) override;
  WorkPtr all_to_all(const Buffer& send, const Buffer& recv, const CollectiveOptions& opts) override;
  WorkPtr all_to_all_v(const Buffer& send, const std::vector<std::size_t>& send_counts,
                       const std::vector<std::size_t>& send_displs, const Buffer& recv,
                       const std::vector<std::size_t>& recv_counts, const std::vector<std::size_t>& recv_displs,
                       const CollectiveOptions& opts) override;
  WorkPtr barrier(const CollectiveOptions& opts) override;

  std::shared_ptr<ProcessGroup> split(int color, int key) override;
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) override;
  std::shared_ptr<ProcessGroup> new_group_of_members(const std::vector<int>& ranks, Store& rendezvous) override;

  void set_algorithm(Collective c, const std::string& name) override;
  std::string explain(Collective c, std::size_t bytes, Device device = Device::host()) const override;
  void abort() noexcept override;
  ShrinkResult shrink(const ShrinkOptions& opts) override;

 private:
  /// One collective of the regular (not v) kind: run inline in inline_args_ when it may (see the definition),
  /// else through submit().
  WorkPtr call(Collective c, const Buffer& send, const Buffer& recv, int root, Reduction red,
               const CollectiveOptions& opts);
  /// Validates, numbers and runs (or queues) one collective.
  WorkPtr submit(coll::Args&& args, const CollectiveOptions& opts);
  /// Numbers and runs a host call on the caller's thread, which holds the executor (Executor::try_enter_inline);
  /// leaves it. Returns a completed handle, or throws the call's failure.
  WorkPtr run_inline(const coll::Args& args, const CollectiveOptions& opts, std::string_view problem,
                     Executor::Entry entry);
  /// Runs one collective under the flight recorder; a timeout gets the report of where every rank is. `problem`:
  /// a caller mistake found here, which the engine fails on every rank (coll::Engine::run).
  void run_recorded(const coll::Args& args, const std::string& algorithm, const Deadline& deadline, uint64_t seq,
                    std::string_view problem = {});
  /// run_recorded()'s failure, from inside its handler: ends the recorder's entry and rethrows it - a timeout with
  /// the report of where every rank is, and the rank that failed first leading.
  [[noreturn]] void fail_recorded(uint64_t seq);
  /// Validates and posts one send or receive (`peer` may be kAnySource for receives).
  WorkPtr post_p2p(bool is_send, const Buffer& buf, int peer, int tag, const P2POptions& opts);
  /// Builds the subgroup whose members (world ranks, in group-rank order) include this rank; the first member
  /// publishes the group's tag context at `key` of `rendezvous`, the others read it there. `check_members`: the
  /// first member also checks every member's rank list (when no collective over the parent made them agree).
  std::shared_ptr<ProcessGroup> make_subgroup(const std::vector<int>& world_members, Store& rendezvous,
                                              const std::string& key, bool check_members);
  /// `ranks` as world ranks, after checking they are distinct ranks of this group (`op` names the call).
  std::vector<int> world_members_of(const std::vector<int>& ranks, const char* op) const;
  const std::string& label() const { return label_; }
  void check_peer(const char* op, int peer, bool allow_any) const;
  /// Throws when the group cannot run calls (shrunk, or its mesh failed); `op` names the call. Inline: every call
  /// asks it, and a usable group answers with two loads.
  void check_usable(const char* op) const {
    if (!usable()) throw_unusable(op);
  }
  bool usable() const { return !world_->shrunk.load(std::memory_order_relaxed) && !world_->mesh->failed(); }
  [[noreturn]] void throw_unusable(const char* op) const;

  std::shared_ptr<World> world_;
  coll::GroupView view_;
  std::string label_;  // "rank 2/4" or "rank 1/2 of group 3", for error messages
  std::shared_ptr<Store> store_;
  std::unique_ptr<coll::Engine> engine_;
  std::shared_ptr<FlightRecorder> recorder_;
  // The mesh, the group rank of each world rank and the label, shared with every point-to-point handle (one
  // reference a message; a copy each cost an allocation)
  std::shared_ptr<const P2PGroup> p2p_;
  std::atomic<uint64_t> rounds_{0};  // split / new_group calls on this group
  StreamOrders streams_;             // CUDA stream ordering, one per device used
  Executor executor_;
  // The Args of the call that holds the executor inline (call()): only that call writes or reads it. Its vectors
  // stay empty and its chosen_algorithm is the recorder's slot.
  coll::Args inline_args_;
};

}  // namespace dcomm::runtime
