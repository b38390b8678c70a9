#include "runtime/work_impl.hpp"

#include <fmt/format.h>

#include <dcomm/error.hpp>

namespace dcomm::runtime {
namespace {

Duration resolve(Duration timeout, Duration group_timeout) { return timeout == kDefaultTimeout ? group_timeout : timeout; }

}  // namespace

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

P2PWork::P2PWork(std::shared_ptr<const P2PGroup> group, bool is_send, int peer, int tag, Deadline deadline)
    : group_(std::move(group)),
      is_send_(is_send),
      peer_(peer),
      tag_(tag),
      deadline_(deadline) {}

std::string P2PWork::describe(const P2PGroup& group, bool is_send, int peer, int tag) {
  std::string who = peer == kAnySource ? std::string("any rank") : fmt::format("rank {}", peer);
  return fmt::format("{} {} (tag {}) {}", is_send ? "send to" : "recv from", who, tag, group.label);
}

bool P2PWork::is_completed() {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) return true;
  try {
    return group_->mesh->test(request_);
  } catch (...) {
    fail(std::current_exception());
    return true;
  }
}

bool P2PWork::wait(Duration timeout) {
  transport::Request& r = request_;
  // Finished already (a blocking call's handle, waited for again): no lock, no clock, nothing to wait for. The
  // receive's size was set when its message was delivered.
  if (!failed_.load(std::memory_order_acquire) && !r.cancelled && r.op->state() == transport::Op::State::kDone) {
    return true;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) std::rethrow_exception(error_);
  // The op's own deadline (set when it was posted) and the caller's bound, whichever comes first.
  Deadline bound = timeout == kDefaultTimeout ? deadline_ : Deadline::after(timeout);
  if (deadline_.at() < bound.at()) bound = deadline_;
  try {
    group_->mesh->wait(r, bound, transport::WaitWhat(&P2PWork::what_of, this));
  } catch (const TimeoutError&) {
    // A caller-chosen bound that ran out leaves the request posted: it may still complete.
    if (bound.at() != deadline_.at()) throw;
    fail(std::current_exception());
    throw;
  } catch (...) {
    fail(std::current_exception());
    throw;
  }
  if (r.cancelled) {
    fail(std::make_exception_ptr(AbortedError(what() + ": aborted before a message matched")));
    std::rethrow_exception(error_);
  }
  return true;
}

std::exception_ptr P2PWork::exception() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_ && request_.op->state() == transport::Op::State::kFailed) fail(request_.op->error());
  return error_;
}

void P2PWork::abort() noexcept {
  try {
    if (request_.kind == transport::Request::Kind::kRecv) {
      group_->mesh->cancel(request_);
    } else if (!request_.op->done()) {
      // A send cannot be withdrawn once the peer may be reading it; aborting it aborts the group, as in NCCL.
      group_->mesh->poison(std::make_exception_ptr(AbortedError(what() + ": aborted by the caller while in flight")));
    }
  } catch (...) {
    // abort() never throws.
  }
}

int P2PWork::source() const {
  int s = request_.source;
  if (s < 0) return s;
  return group_->world_to_group[static_cast<std::size_t>(s)];
}

std::size_t P2PWork::bytes() const {
  // Sends report 0, as a small send's handle (a completed one, ProcessGroupImpl::post_p2p) does: the size is a
  // receive's news, the sender knows its own.
  return request_.kind == transport::Request::Kind::kRecv ? request_.received : 0;
}

}  // namespace dcomm::runtime
