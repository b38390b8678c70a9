#include "runtime/work_impl.hpp"

#include <fmt/format.h>

#include <dcomm/error.hpp>

namespace dcomm::runtime {
namespace {

Duration resolve(Duration timeout, Duration group_timeout) { return timeout == kDefaultTimeout ? group_timeout : timeout; }

class CompletedWork final : public Work {
 public:
  bool is_completed() override { return true; }
  bool wait(Duration /*timeout*/) override { return true; }
  std::exception_ptr exception() override { return nullptr; }
  void abort() noexcept override {}
  void wait_stream(void* /*stream*/) override {}
};

}  // namespace

WorkPtr completed_work() {
  static const WorkPtr kDone = std::make_shared<CompletedWork>();
  return kDone;
}

bool CollectiveWork::is_completed() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

bool CollectiveWork::wait(Duration timeout) {
  Deadline deadline = Deadline::after(resolve(timeout, group_timeout_));
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_) {
    if (deadline.at() == Clock::time_point::max()) {
      cv_.wait(lock);
    } else if (cv_.wait_until(lock, deadline.at()) == std::cv_status::timeout && !done_) {
      throw TimeoutError(fmt::format("{}: not completed after {} (timeout {}); the operation itself keeps running "
                                     "under its own timeout — wait again, or abort() it",
                                     what_, format_duration(deadline.elapsed()), format_duration(deadline.timeout())));
    }
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

std::exception_ptr CollectiveWork::exception() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void CollectiveWork::abort() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (!done_) aborted_ = true;
}

void CollectiveWork::wait_stream(void* stream) {
  if (stream_waiter_) {
    stream_waiter_(stream);
  } else {
    wait(kDefaultTimeout);
  }
}

bool CollectiveWork::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

void CollectiveWork::finish(std::exception_ptr error) noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

P2PWork::P2PWork(std::shared_ptr<transport::Mesh> mesh, transport::RequestPtr request, const What& what,
                 Deadline deadline, Duration group_timeout, std::shared_ptr<const std::vector<int>> world_to_group)
    : mesh_(std::move(mesh)),
      request_(std::move(request)),
      what_(what),
      deadline_(deadline),
      group_timeout_(group_timeout),
      world_to_group_(std::move(world_to_group)) {}

bool P2PWork::is_completed() {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) return true;
  try {
    return mesh_->test(*request_);
  } catch (...) {
    error_ = std::current_exception();
    return true;
  }
}

bool P2PWork::wait(Duration timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) std::rethrow_exception(error_);
  // The op's own deadline (set when it was posted) and the caller's bound, whichever comes first.
  Deadline bound = timeout == kDefaultTimeout ? deadline_ : Deadline::after(timeout);
  if (deadline_.at() < bound.at()) bound = deadline_;
  try {
    mesh_->wait(*request_, bound, what());
  } catch (const TimeoutError&) {
    // A caller-chosen bound that ran out leaves the request posted: it may still complete.
    if (bound.at() != deadline_.at()) throw;
    error_ = std::current_exception();
    throw;
  } catch (...) {
    error_ = std::current_exception();
    throw;
  }
  if (request_->cancelled) {
    error_ = std::make_exception_ptr(AbortedError(std::string(what()) + ": aborted before a message matched"));
    std::rethrow_exception(error_);
  }
  return true;
}

std::exception_ptr P2PWork::exception() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_ && request_->op->state() == transport::Op::State::kFailed) error_ = request_->op->error();
  return error_;
}

void P2PWork::abort() noexcept {
  try {
    if (request_->kind == transport::Request::Kind::kRecv) {
      mesh_->cancel(*request_);
    } else if (!request_->op->done()) {
      // A send cannot be withdrawn once the peer may be reading it; aborting it aborts the group, as in NCCL.
      mesh_->poison(std::make_exception_ptr(AbortedError(std::string(what()) + ": aborted by the caller while in flight")));
    }
  } catch (...) {
    // abort() never throws.
  }
}

int P2PWork::source() const {
  int s = request_->source;
  if (s < 0 || !world_to_group_) return s;
  return (*world_to_group_)[static_cast<std::size_t>(s)];
}

std::size_t P2PWork::bytes() const {
  return request_->kind == transport::Request::Kind::kRecv ? request_->received : request_->capacity;
}

}  // namespace dcomm::runtime
