#pragma once
// The two kinds of Work handle: a collective queued on the group's executor (completed by whichever thread runs
// it), and a point-to-point request that lives in the mesh (completed by driving the mesh's progress).

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <dcomm/work.hpp>

#include "common/deadline.hpp"
#include "transports/mesh.hpp"

namespace dcomm::runtime {

/// A collective's handle. The executor calls run() once; waiters block on a condition variable.
class CollectiveWork : public Work {
 public:
  /// `what` names the call for errors ("all_reduce rank 1/4 (seq 7)"); `group_timeout` backs kDefaultTimeout.
  CollectiveWork(std::string what, Duration group_timeout) : what_(std::move(what)), group_timeout_(group_timeout) {}

  bool is_completed() override;
  bool wait(Duration timeout) override;
  std::exception_ptr exception() override;
  void abort() noexcept override;
  /// CUDA collectives: a device-side wait on `stream` (set_stream_waiter); host collectives wait on the host.
  void wait_stream(void* stream) override;
  void set_stream_waiter(std::function<void(void*)> waiter) { stream_waiter_ = std::move(waiter); }

  /// Marks the work finished; `error` null on success. Called once by the executor.
  void finish(std::exception_ptr error) noexcept;
  /// Whether abort() was called before the work started (the executor then skips it).
  bool aborted() const;
  const std::string& what() const { return what_; }

 private:
  std::string what_;
  Duration group_timeout_;
  std::function<void(void*)> stream_waiter_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool aborted_ = false;
  std::exception_ptr error_;
};

/// What completed_work() points to.
class CompletedWork final : public Work {
 public:
  bool is_completed() override { return true; }
  bool wait(Duration /*timeout*/) override { return true; }
  std::exception_ptr exception() override { return nullptr; }
  void abort() noexcept override {}
  void wait_stream(void* /*stream*/) override {}
};
/// Constant-initialised: no guard to test at each use.
constinit inline CompletedWork kCompletedWork;

/// The handle a blocking collective returns once it has succeeded: already complete, with nothing to wait for.
/// One object serves every such call, so the blocking path allocates no handle; a pointer without a control block
/// (the aliasing constructor over an empty owner), so copying and dropping it touch no reference count, where a
/// shared one cost two locked instructions on every blocking call. Inline: two stores.
inline WorkPtr completed_work() { return WorkPtr(WorkPtr(), &kCompletedWork); }

/// What every point-to-point handle of one group shares, one reference a handle: the mesh, the group rank of each
/// world rank (-1 outside the group) and the group's label for errors ("rank 1/4 of group 2").
struct P2PGroup {
  std::shared_ptr<transport::Mesh> mesh;
  std::vector<int> world_to_group;
  std::string label;
};

/// A point-to-point handle over a mesh request. What it is, for errors ("recv from rank 3 (tag 7) rank 1/4 of group
/// 2"), is written only when an error needs it: putting it together on every message cost more instructions than
/// the rest of a small message's path.
class P2PWork : public Work {
 public:
  /// The handle holds its request (one allocation for both): post it through the mesh as
  /// `transport::RequestPtr(handle, &handle->request())`, which keeps the handle alive while a transport holds it.
  P2PWork(std::shared_ptr<const P2PGroup> group, bool is_send, int peer, int tag, Deadline deadline);
  transport::Request& request() { return request_; }

  bool is_completed() override;
  bool wait(Duration timeout) override;
  std::exception_ptr exception() override;
  void abort() noexcept override;
  int source() const override;
  std::size_t bytes() const override;

  /// "send to rank 1 (tag 0) rank 0/2", "recv from any rank (tag 5) rank 1/4 of group 2".
  static std::string describe(const P2PGroup& group, bool is_send, int peer, int tag);
  std::string what() const { return describe(*group_, is_send_, peer_, tag_); }

 private:
  static std::string what_of(const void* self) { return static_cast<const P2PWork*>(self)->what(); }
  /// Records the handle's failure (caller holds mu_).
  void fail(std::exception_ptr e) {
    error_ = std::move(e);
    failed_.store(true, std::memory_order_release);
  }

  std::shared_ptr<const P2PGroup> group_;
  transport::Request request_;
  bool is_send_;
  int peer_;
  int tag_;
  Deadline deadline_;
  std::mutex mu_;
  std::exception_ptr error_;
  std::atomic<bool> failed_{false};  ///< error_ is set: read without the lock by a wait on a finished handle
};

}  // namespace dcomm::runtime
