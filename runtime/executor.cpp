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

bool Executor::try_enter_inline() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!queue_.empty() || running_) return false;
  running_ = true;
  return true;
}

void Executor::leave_inline() {
  std::lock_guard<std::mutex> lock(mu_);
  running_ = false;
  if (!queue_.empty()) cv_.notify_all();
}

void Executor::submit(const std::shared_ptr<CollectiveWork>& work, Task task, bool async) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!async && queue_.empty() && !running_) {
    running_ = true;
    lock.unlock();
    Item item{work, std::move(task)};
    run_one(item);
    lock.lock();
    running_ = false;
    if (!queue_.empty()) cv_.notify_all();
    return;
  }
  queue_.push_back(Item{work, std::move(task)});
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
    cv_.wait(lock, [this] { return stopping_ || (!queue_.empty() && !running_); });
    if (stopping_) return;
    Item item = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    lock.unlock();
    run_one(item);
    lock.lock();
    running_ = false;
    cv_.notify_all();
  }
}

void Executor::fail_pending(std::exception_ptr cause) noexcept {
  std::deque<Item> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dropped.swap(queue_);
  }
  for (Item& item : dropped) item.work->finish(cause);
}

}  // namespace dcomm::runtime
