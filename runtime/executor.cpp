#include "runtime/executor.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <dcomm/error.hpp>

namespace dcomm::runtime {

Executor::~Executor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  fail_pending(std::make_exception_ptr(AbortedError("the process group was destroyed before the operation ran")));
}

void Executor::run_one(Item& item) noexcept {
  if (item.work->aborted()) {
    item.work->finish(std::make_exception_ptr(AbortedError(item.work->what() + ": aborted before it started")));
    return;
  }
  try {
    item.task();
    item.work->finish(nullptr);
  } catch (...) {
    item.work->finish(std::current_exception());
  }
}

void Executor::release_quietly() noexcept { running_.store(false); }

void Executor::release() {
  running_.store(false);
  // The worker checks running_ under the lock before it sleeps: taking the lock to notify cannot miss it.
  if (queued_.load() != 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
}

bool Executor::membarrier_ready() noexcept {
  // Registered once per process; refused (an old kernel, a seccomp profile): shared mode from the start.
  static const bool ready = ::syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  return ready;
}

void Executor::share() {
  if (!single_.load(std::memory_order_acquire)) return;
  single_.store(false);
  // Every thread of the process runs a full memory barrier before this returns: from here on, the owner's
  // try_enter_inline() sees the mode ended, and a run it began before shows in owner_inline_, which the claims
  // check. Registered (membarrier_ready), so it does not fail.
  ::syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

void Executor::wake_after_inline() {
  // leave_inline() ends with a plain store (release), not release()'s sequentially consistent one: that is a locked
  // instruction, which waits for every store before it to reach the cache - here the call's store to its
  // shared-memory slot, a line the other rank holds - and it kept a rank's 8 B rooted calls in step with the other rank's (broadcast on 2 ranks bound:
  // 0.17 us a call with it, 0.10 without; docs/benchmark.md, session 24). Without the full fence this thread may
  // read queued_ before its store of running_ is seen, and so miss a task another thread queued just then: the worker
  // does not sleep on such a task for more than kInlineRecheck (worker_loop).
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

void Executor::submit(const std::shared_ptr<CollectiveWork>& work, Task task, bool async) {
  if (!async) {
    const Entry entry = try_enter_inline();
    if (entry != Entry::kNone) {
      Item item{work, std::move(task)};
      run_one(item);
      leave_inline(entry);
      return;
    }
  }
  share();  // a task on the worker: single-thread mode ends (try_enter_inline)
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(Item{work, std::move(task)});
  queued_.store(queue_.size());
  if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  cv_.notify_all();
  lock.unlock();
  // A blocking call behind queued async work waits its turn; its own deadline bounds its run, and the queued
  // ones ahead are bounded by theirs, so this wait ends.
  if (!async) {
    while (!work->is_completed()) {
      try {
        work->wait(kNoTimeout);
      } catch (...) {
        return;  // the caller reads the failure from the handle
      }
    }
  }
}

void Executor::worker_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    if (running_.load() || owner_inline_.load(std::memory_order_acquire)) {
      // An inline call holds it (a claim, or the owner's run begun in single-thread mode). Its end wakes this loop,
      // unless it ended as the task was queued (leave_inline): look again after a while all the same.
      cv_.wait_for(lock, kInlineRecheck);
      continue;
    }
    if (!claim()) continue;  // an inline call took it first
    if (owner_inline_.load(std::memory_order_acquire)) {  // the owner's look at the mode, just before it ended
      release_quietly();
      cv_.wait_for(lock, kInlineRecheck);
      continue;
    }
    Item item = std::move(queue_.front());
    queue_.pop_front();
    queued_.store(queue_.size());
    lock.unlock();
    run_one(item);
    release();
    lock.lock();
  }
}

void Executor::fail_pending(std::exception_ptr cause) noexcept {
  std::deque<Item> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dropped.swap(queue_);
    queued_.store(0);
  }
  for (Item& item : dropped) item.work->finish(cause);
}

}  // namespace dcomm::runtime
