#pragma once
// The Work torch gets back: one or more dcomm handles, a finisher that runs once they succeed (copying staged
// results back into the caller's tensors), and a real future that completes when they do.

#include <atomic>
#include <condition_variable>
#include <dcomm/work.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

namespace dcomm_torch {

class Poller;

/// dcomm's error as torch code expects it: a timeout's message also says "Timed out" (what gloo says, and what
/// torch's tests and users match); everything else is unchanged.
std::exception_ptr for_torch(std::exception_ptr error);

class DcommWork : public c10d::Work {
 public:
  /// `finish` runs once every handle succeeded (on whichever thread sees it first); `outputs` is result() and the
  /// future's value; `op` names the call in errors. `cuda_stream` (a cudaStream_t, null on the host) is the stream
  /// synchronize() makes wait.
  DcommWork(int rank, c10d::OpType type, std::vector<dcomm::WorkPtr> works, std::function<void()> finish,
            std::vector<at::Tensor> outputs, std::shared_ptr<Poller> poller);
  ~DcommWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout) override;
  void abort() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  /// Non-blocking: completes the work when every handle has; returns whether it is complete.
  bool poll();

 private:
  // Runs the finisher (on success) and marks the work and its future complete. Once.
  void complete(std::exception_ptr error);
  // Completes future_ with the outcome (under complete_mu_, once the work is done).
  void settle_future();

  std::vector<dcomm::WorkPtr> works_;
  std::function<void()> finish_;
  std::vector<at::Tensor> outputs_;
  std::shared_ptr<Poller> poller_;
  // Made on the first getFuture() (most calls never ask: a collective torch waits for at once pays no future).
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::mutex complete_mu_;  // serializes complete() and getFuture(); c10d::Work::mutex_ guards completed_, exception_
  std::atomic<bool> done_{false};
  std::atomic<bool> polled_{false};  // registered with the poller
};

/// Completes the works whose futures someone holds, so that a future's callbacks (DDP's comm hooks) run without
/// anyone calling wait(). One thread per backend, started by the first add(); it sleeps while nothing is
/// registered and backs off from spinning to 1 ms sleeps while something is.
class Poller {
 public:
  Poller();
  ~Poller();
  void add(c10::intrusive_ptr<DcommWork> work);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<c10::intrusive_ptr<DcommWork>> pending_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dcomm_torch
