#include "runtime/executor.hpp"

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

void Executor::release() {
  running_.store(false);
  // The worker checks running_ under the lock before it sleeps: taking the lock to notify cannot miss it.
  if (queued_.load() != 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
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
  if (!async && try_enter_inline()) {
    Item item{work, std::move(task)};
    run_one(item);
    release();
    return;
  }
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
    if (running_.load()) {
      // An inline call holds it. Its end wakes this loop, unless it ended as the task was queued (leave_inline): look
      // again after a while all the same.
      cv_.wait_for(lock, kInlineRecheck);
      continue;
    }
    if (!claim()) continue;  // an inline call took it first
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
