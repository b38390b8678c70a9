#pragma once
// The one Mesh implementation: a route (transport) per peer, a SelfChannel for this rank, the Matcher, and the
// lock that serialises progress and matching. Built by Mesh::create (mesh_create.cpp); wait() and the liveness
// checks live in mesh_wait.cpp.

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <dcomm/error.hpp>

#include "rendezvous/failure_record.hpp"
#include "transports/matcher.hpp"
#include "transports/quick_spins.hpp"
#include "transports/mesh.hpp"
#include "transports/self_channel.hpp"

namespace dcomm::transport {

class MeshImpl final : public Mesh, private ArrivalSink {
 public:
  /// `route[p]` carries traffic to peer p (ignored for this rank); `transports` owns them. `device_route[p]`, where
  /// set, carries device memory to peer p instead (cuda_ipc); empty: every buffer takes `route`.
  MeshImpl(std::vector<PeerInfo> peers, int rank, std::vector<std::unique_ptr<Transport>> transports,
           std::vector<Transport*> route, const MeshOptions& options, std::vector<Transport*> device_route = {});
  ~MeshImpl() override { close(); }

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(peers_.size()); }
  const PeerInfo& peer(int rank) const override;
  const char* transport_name(int peer) const override;

  using Mesh::irecv;
  using Mesh::isend;
  void isend(const RequestPtr& r, int peer, uint64_t tag, const void* data, std::size_t bytes,
             const Device& device) override;
  void irecv(const RequestPtr& r, int peer, uint64_t tag, void* data, std::size_t capacity,
             const Device& device) override;
  bool send_now(int peer, uint64_t tag, const void* data, std::size_t bytes) override;
  bool test(Request& r) override;
  void wait(Request& r, const Deadline& deadline, const WaitWhat& what) override;
  void wait_until(bool (*ready)(const void* arg), std::string (*awaited)(const void* arg), const void* arg, int peer,
                  const Deadline& deadline, std::string_view what) override;
  bool cancel(Request& r) override;
  void progress() override;

  void poison(std::exception_ptr cause) noexcept override;
  std::exception_ptr poisoned() const override;
  void close() noexcept override;

 private:
  void arrived(Transport& from, const Incoming& msg) override;
  /// Pairs a receive with a message: pulls the payload, or fails the receive when it does not fit.
  void deliver(const RequestPtr& r, Transport& from, const Incoming& msg);
  /// Drives every transport once; poisons the mesh and rethrows when one fails. Caller holds mu_.
  bool progress_locked();
  Transport* route(int peer) { return peer == rank_ ? &self_ : route_[static_cast<std::size_t>(peer)]; }
  /// The transport for memory on `device`: the peer's device route when it has one and the memory is not host.
  Transport* route(int peer, const Device& device) {
    if (device.is_host() || peer == rank_ || device_route_.empty()) return route(peer);
    Transport* t = device_route_[static_cast<std::size_t>(peer)];
    return t != nullptr ? t : route(peer);
  }
  void throw_if_poisoned() const;
  void check_args(const char* op, int peer, uint64_t tag, const void* data, std::size_t bytes, const Device& device,
                  bool any_source_ok);
  /// Why a wait must fail now (mesh_blame.cpp): the recorded root cause when another rank failed first, then
  /// what the transports see of the request's peer(s); nullopt while everything looks alive. Caller holds mu_.
  struct Blame {
    ErrorCode code;
    std::string text;
    int rank;  ///< the rank blamed
  };
  std::optional<Blame> blame_locked(const Request& r);
  /// An op's own failure `error`, led by the recorded root cause when that is another rank than r.peer.
  std::string explain_op_failure(const Request& r, const std::string& error);
  /// Records peer p as the root cause when its process on this host has exited. Caller holds mu_.
  void record_exit_locked(int p, const std::string& why);
  /// The recorded root cause, unless none is recorded or it names this rank.
  std::optional<rdzv::FailureRecord> root_cause();
  static std::string blame_text(const rdzv::FailureRecord& root, const std::string& seen);
  /// "recv from rank 1 tag 7 over shm (4.0 MiB)"
  std::string describe(const Request& r) const;
  [[noreturn]] void fail_wait(std::exception_ptr cause);

  std::vector<PeerInfo> peers_;
  /// By world rank: whether that rank may run while this one does (not never_run_together): a small receive from
  /// it spins kQuickAnswerPolls where ranks share cores (mesh_wait.cpp).
  std::vector<bool> quick_answer_;
  /// A receive of at most this many bytes from a rank that may run while this one does spins this many polls before
  /// it yields where ranks share cores (mesh_wait.cpp).
  static constexpr std::size_t kQuickAnswerBytes = 1024;
  static constexpr unsigned kQuickAnswerPolls = 16;
  /// By world rank: what the quick spins for that peer's answers found (QuickSpins), where the scheduler may put it
  /// on this rank's core (may_share_core); null elsewhere: bound to cores of their own, a quick spin that saw no
  /// answer only means the peer was descheduled, and the quick spin stays.
  std::vector<std::unique_ptr<QuickSpins>> quick_spins_;
  int rank_;
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<Transport*> route_;
  std::vector<Transport*> device_route_;
  MeshOptions options_;
  SelfChannel self_;
  Matcher matcher_;
  std::mutex mu_;  ///< progress, matching and every call into a transport
  bool closed_ = false;
  mutable std::mutex poison_mu_;
  std::exception_ptr poison_;
};

}  // namespace dcomm::transport
