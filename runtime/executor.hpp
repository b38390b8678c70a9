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
  /// How a blocking call holds the executor (try_enter_inline): not at all (it queues), by claim (any thread, with a
  /// locked instruction), or as the owner (see below, without one).
  enum class Entry : uint8_t { kNone, kClaimed, kOwned };
  /// The fast path of a blocking call: when nothing is queued or running, the caller runs its operation on its own
  /// thread and must call leave_inline() with what this returned after it. Saves the task's allocation and a
  /// hand-off on every small collective.
  ///
  /// Single-thread mode: until a second thread calls or a task is queued, the first thread to call (the owner)
  /// enters with plain stores and loads, no locked instruction. A locked instruction waits for every store before
  /// it to reach the cache, here the last call's store to its shared-memory slot, a line the other rank holds:
  /// with the claim's compare-and-swap and the call number's fetch-and-add, 8 B rooted calls on 2 ranks bound took
  /// 70-73 ns a call (p50), 64-67 without either (one of them left: 72). The owner publishes that it is inside
  /// (owner_inline_) and then checks the mode; a thread that ends the mode (share()) stores it and then runs a
  /// process-wide memory barrier (membarrier(2)), so that either it sees the owner inside or the owner sees the
  /// mode ended: the owner's side of the barrier is the kernel's. Where membarrier is not allowed, the executor
  /// starts in shared mode (claims alone). Once ended, the mode stays ended.
  /// Inline, as leave_inline(): every blocking call runs both.
  Entry try_enter_inline() {
    if (single_.load(std::memory_order_relaxed) && owner_thread()) {
      owner_inline_.store(true, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the other side: share()'s membarrier
      if (single_.load(std::memory_order_acquire)) return Entry::kOwned;
      owner_inline_.store(false, std::memory_order_release);
    }
    if (single_.load(std::memory_order_acquire)) share();  // another thread than the owner
    if (queued_.load() != 0 || !claim()) return Entry::kNone;
    // A task queued between the first look and the claim goes first; an owner's run begun before the mode ended
    // goes on: back off.
    if (queued_.load() != 0 || owner_inline_.load(std::memory_order_acquire)) {
      release();
      return Entry::kNone;
    }
    return Entry::kClaimed;
  }
  /// Ends an inline run without a locked instruction (executor.cpp, wake_after_inline(), says why and what that
  /// costs).
  void leave_inline(Entry how) {
    if (how == Entry::kOwned) {
      owner_inline_.store(false, std::memory_order_release);
    } else {
      running_.store(false, std::memory_order_release);
    }
    if (queued_.load(std::memory_order_acquire) != 0) wake_after_inline();
  }
  /// The group's next call number. Only by the thread that holds the executor (an Entry other than kNone, or the
  /// worker running a task): those never overlap, so a plain count does, without a locked instruction.
  uint64_t next_seq() { return seq_++; }
  /// Ends single-thread mode (see try_enter_inline); called by submit() before it queues, and by a thread other
  /// than the owner before it claims. Returns at once; an owner's run begun before goes on, and claims wait for it.
  void share();
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

  /// Whether this thread is the owner (the first to call try_enter_inline becomes it).
  bool owner_thread() noexcept {
    const std::thread::id me = std::this_thread::get_id();
    std::thread::id owner = owner_.load(std::memory_order_relaxed);
    if (owner == me) return true;
    return owner == std::thread::id{} && owner_.compare_exchange_strong(owner, me);
  }
  /// Whether this process may run membarrier(2)'s private expedited barrier (registered once per process).
  static bool membarrier_ready() noexcept;
  /// Takes running_ for the caller; false when another task holds it.
  bool claim() noexcept {
    bool idle = false;
    return running_.compare_exchange_strong(idle, true);
  }
  /// leave_inline()'s wake-up of the worker, when tasks wait.
  void wake_after_inline();
  /// Gives running_ back and wakes the worker when tasks wait.
  void release();
  /// Gives running_ back; for the worker, which holds the lock and is about to wait anyway.
  void release_quietly() noexcept;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  // A task is executing, inline or on the worker. Atomic, with queued_ beside it, so that the inline path of a
  // small blocking call takes no lock: a claim, a check that nothing is queued, and a release.
  std::atomic<bool> running_{false};
  std::atomic<std::size_t> queued_{0};  // queue_.size(), readable without the lock
  // Single-thread mode (try_enter_inline): on while no thread but the owner has called and nothing was queued.
  std::atomic<bool> single_{membarrier_ready()};
  std::atomic<std::thread::id> owner_{};  // the first thread to call try_enter_inline()
  std::atomic<bool> owner_inline_{false};  // the owner runs inline in single-thread mode
  uint64_t seq_ = 0;                      // next_seq(): by the holder of the executor only
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace dcomm::runtime
