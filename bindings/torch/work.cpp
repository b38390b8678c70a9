#include "work.hpp"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <dcomm/error.hpp>

namespace dcomm_torch {

std::exception_ptr for_torch(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const dcomm::TimeoutError& e) {
    return std::make_exception_ptr(dcomm::TimeoutError(std::string("dcomm: Timed out in ") + e.what()));
  } catch (...) {
    return error;
  }
}

DcommWork::DcommWork(int rank, c10d::OpType type, std::vector<dcomm::WorkPtr> works, std::function<void()> finish,
                     std::vector<at::Tensor> outputs, std::shared_ptr<Poller> poller)
    : c10d::Work(rank, type),
      works_(std::move(works)),
      finish_(std::move(finish)),
      outputs_(std::move(outputs)),
      poller_(std::move(poller)) {}

DcommWork::~DcommWork() = default;

void DcommWork::complete(std::exception_ptr error) {
  std::lock_guard<std::mutex> once(complete_mu_);
  if (done_.load()) return;
  if (!error) {
    try {
      if (finish_) finish_();
    } catch (...) {
      error = std::current_exception();
    }
  }
  finish_ = nullptr;
  if (error) error = for_torch(error);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    completed_ = true;
    exception_ = error;
  }
  done_.store(true);
  cv_.notify_all();
  if (future_) settle_future();
}

void DcommWork::settle_future() {
  std::exception_ptr error = exception();
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

bool DcommWork::poll() {
  if (done_.load()) return true;
  for (const auto& w : works_) {
    if (!w->is_completed()) return false;
  }
  std::exception_ptr error;
  for (const auto& w : works_) {
    if (auto e = w->exception(); e && !error) error = e;
  }
  complete(error);
  return true;
}

bool DcommWork::isCompleted() { return poll(); }

bool DcommWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr DcommWork::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

int DcommWork::sourceRank() const {
  TORCH_CHECK(works_.size() == 1 && works_[0]->source() >= 0,
              "dcomm: sourceRank() is only known for a completed recv (recvAnysource)");
  return works_[0]->source();
}

std::vector<at::Tensor> DcommWork::result() { return outputs_; }

void DcommWork::synchronize() {
  // Host tensors: wait() already left the results in place. Device tensors: dcomm's collectives order the
  // caller's stream after themselves when they are issued (CollectiveOptions::stream), so there is nothing more.
}

bool DcommWork::wait(std::chrono::milliseconds timeout) {
  if (!done_.load()) {
    // c10d's kNoTimeout means "no bound of the caller's"; dcomm's group timeout still bounds every operation.
    dcomm::Duration bound = timeout == ::kNoTimeout ? dcomm::kDefaultTimeout : timeout;
    std::exception_ptr error;
    for (const auto& w : works_) {
      try {
        w->wait(bound);
      } catch (const dcomm::TimeoutError&) {
        // Our own bound ran out while the operation may still be running: report, do not complete.
        if (bound != dcomm::kDefaultTimeout && !w->is_completed())
          std::rethrow_exception(for_torch(std::current_exception()));
        if (!error) error = std::current_exception();
      } catch (...) {
        if (!error) error = std::current_exception();
      }
    }
    complete(error);
  }
  if (auto e = exception()) std::rethrow_exception(e);
  return true;
}

void DcommWork::abort() {
  for (const auto& w : works_) w->abort();
}

c10::intrusive_ptr<c10::ivalue::Future> DcommWork::getFuture() {
  std::lock_guard<std::mutex> once(complete_mu_);
  if (!future_) {
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    if (done_.load()) settle_future();
  }
  if (!done_.load() && !polled_.exchange(true)) {
    poller_->add(c10::intrusive_ptr<DcommWork>::reclaim_copy(this));
  }
  return future_;
}

Poller::Poller() = default;

Poller::~Poller() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Poller::add(c10::intrusive_ptr<DcommWork> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(std::move(work));
    // Started by the first future asked for: most groups never need one (torch waits for its calls at once).
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  cv_.notify_all();
}

void Poller::loop() {
  using namespace std::chrono;
  int idle_rounds = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
    if (stopping_) return;
    std::vector<c10::intrusive_ptr<DcommWork>> batch;
    batch.swap(pending_);
    lock.unlock();
    // poll() may run a finisher and a future's callbacks (which may issue more operations): never under mu_.
    auto still = std::remove_if(batch.begin(), batch.end(), [](auto& w) { return w->poll(); });
    bool progressed = still != batch.end();
    batch.erase(still, batch.end());
    idle_rounds = progressed ? 0 : idle_rounds + 1;
    if (!batch.empty()) {
      // Spin briefly (small collectives finish in microseconds), then sleep longer and longer, up to 1 ms.
      if (idle_rounds < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(microseconds(std::min(1000, 10 * (idle_rounds - 63))));
      }
    }
    lock.lock();
    pending_.insert(pending_.end(), std::make_move_iterator(batch.begin()), std::make_move_iterator(batch.end()));
  }
}

}  // namespace dcomm_torch
