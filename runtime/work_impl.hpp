#pragma once
// The two kinds of Work handle: a collective queued on the group's executor (completed by whichever thread runs
// it), and a point-to-point request that lives in the mesh (completed by driving the mesh's progress).

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

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

/// The handle a blocking collective returns once it has succeeded: already complete, with nothing to wait for.
/// One object serves every such call, so the blocking path allocates no handle.
WorkPtr completed_work();

/// A point-to-point handle over a mesh request.
class P2PWork : public Work {
 public:
  /// What the handle is, for errors ("recv from rank 3 (tag 7) rank 1/4 of group 2"), put together without an
  /// allocation (one per message shows in small-message latency); past kBytes it is cut.
  class What {
   public:
    static constexpr std::size_t kBytes = 120;
    What& append(std::string_view s) {
      const std::size_t n = std::min(s.size(), kBytes - size_);
      std::memcpy(text_ + size_, s.data(), n);
      size_ += n;
      return *this;
    }
    What& append(int v) {
      char digits[16];
      const auto end = std::to_chars(digits, digits + sizeof digits, v).ptr;
      return append(std::string_view(digits, static_cast<std::size_t>(end - digits)));
    }
    std::string_view view() const { return {text_, size_}; }

   private:
    char text_[kBytes];
    std::size_t size_ = 0;
  };

  /// `world_to_group`: group rank of each world rank, or null on the world group.
  P2PWork(std::shared_ptr<transport::Mesh> mesh, transport::RequestPtr request, const What& what, Deadline deadline,
          Duration group_timeout, std::shared_ptr<const std::vector<int>> world_to_group);

  bool is_completed() override;
  bool wait(Duration timeout) override;
  std::exception_ptr exception() override;
  void abort() noexcept override;
  int source() const override;
  std::size_t bytes() const override;

 private:
  std::shared_ptr<transport::Mesh> mesh_;
  transport::RequestPtr request_;
  std::string_view what() const { return what_.view(); }

  What what_;
  Deadline deadline_;
  Duration group_timeout_;
  std::shared_ptr<const std::vector<int>> world_to_group_;
  std::mutex mu_;
  std::exception_ptr error_;
};

}  // namespace dcomm::runtime
