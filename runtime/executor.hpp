#pragma once
// Runs a group's collectives one at a time, in the order they were issued. A blocking call with nothing queued
// ahead of it runs on the caller's thread (no hand-off, so small collectives pay no thread wake-up); everything
// else queues for the group's worker thread, started on first use.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "runtime/work_impl.hpp"

namespace dcomm::runtime {

class Executor {
 public:
  using Task = std::function<void()>;
  Executor() = default;
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  ~Executor();

  /// Runs `task` after everything submitted before it and finishes `work` with its outcome. With `async`
  /// false, returns only when the task has run.
  void submit(const std::shared_ptr<CollectiveWork>& work, Task task, bool async);
  /// The fast path of a blocking call: true when nothing is queued or running, and then the caller runs its
  /// operation on its own thread and must call leave_inline() after it. Saves the task's allocation and a
  /// hand-off on every small collective.
  /// Inline, as leave_inline(): every blocking call runs both.
  bool try_enter_inline() {
    if (queued_.load() != 0 || !claim()) return false;
    // A task queued between the first look and the claim goes first: back off.
    if (queued_.load() != 0) {
      release();
      return false;
    }
    return true;
  }
  /// Ends an inline run without a locked instruction (executor.cpp, wake_after_inline(), says why and what that
  /// costs).
  void leave_inline() {
    running_.store(false, std::memory_order_release);
    if (queued_.load(std::memory_order_acquire) != 0) wake_after_inline();
  }
  /// How long the worker sleeps on a task queued while an inline call runs before it looks again: the inline call's
  /// end may miss the task (leave_inline) and not wake it, so a task queued just then waits this long at most.
  static constexpr std::chrono::milliseconds kInlineRecheck{1};
  /// Finishes every queued (not yet started) task with `cause`; the running one ends on its own.
  void fail_pending(std::exception_ptr cause) noexcept;

 private:
  struct Item {
    std::shared_ptr<CollectiveWork> work;
    Task task;
  };
  void run_one(Item& item) noexcept;
  void worker_loop();

  /// Takes running_ for the caller; false when another task holds it.
  bool claim() noexcept {
    bool idle = false;
    return running_.compare_exchange_strong(idle, true);
  }
  /// leave_inline()'s wake-up of the worker, when tasks wait.
  void wake_after_inline();
  /// Gives running_ back and wakes the worker when tasks wait.
  void release();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  // A task is executing, inline or on the worker. Atomic, with queued_ beside it, so that the inline path of a
  // small blocking call takes no lock: a claim, a check that nothing is queued, and a release.
  std::atomic<bool> running_{false};
  std::atomic<std::size_t> queued_{0};  // queue_.size(), readable without the lock
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace dcomm::runtime
