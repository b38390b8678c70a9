#include "transports/cuda_ipc/copy_engine.hpp"

#include <dcomm/error.hpp>
#include <fmt/format.h>

#include "transports/cuda_ipc/cuda_check.hpp"

namespace dcomm::transport::cuda_ipc {

cudaStream_t CopyEngine::stream_for(int device) {
  auto it = streams_.find(device);
  if (it != streams_.end()) return it->second;
  cudaStream_t s = nullptr;
  cuda::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
              fmt::format("cuda_ipc: cudaStreamCreate on cuda:{}", device));
  streams_.emplace(device, s);
  return s;
}

void CopyEngine::start(int device, void* dst, const void* src, std::size_t bytes, FinishedCopy done,
                       std::string what) {
  cudaStream_t s = stream_for(device);
  cudaEvent_t ev = nullptr;
  if (!spare_events_.empty()) {
    ev = spare_events_.back();
    spare_events_.pop_back();
  } else {
    cuda::check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), what + ": cudaEventCreate");
  }
  cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
  if (err == cudaSuccess) err = cudaEventRecord(ev, s);
  if (err != cudaSuccess) {
    spare_events_.push_back(ev);
    cuda::throw_error(err, what + ": cudaMemcpyAsync");
  }
  in_flight_.push_back(InFlight{ev, std::move(done), std::move(what)});
}

bool CopyEngine::poll(const std::function<void(const FinishedCopy&)>& finished) {
  bool any = false;
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    cudaError_t err = cudaEventQuery(it->event);
    if (err == cudaErrorNotReady) {
      ++it;
      continue;
    }
    InFlight f = std::move(*it);
    it = in_flight_.erase(it);
    spare_events_.push_back(f.event);
    if (err != cudaSuccess) {
      try {
        cuda::throw_error(err, f.what);
      } catch (...) {
        f.done.error = std::current_exception();
      }
    }
    finished(f.done);
    any = true;
  }
  return any;
}

void CopyEngine::close() noexcept {
  for (auto& [device, s] : streams_) (void)cudaStreamSynchronize(s);
  for (InFlight& f : in_flight_) {
    if (f.done.op) {
      f.done.op->fail(std::make_exception_ptr(AbortedError(f.what + ": aborted because the transport closed")));
    }
    spare_events_.push_back(f.event);
  }
  in_flight_.clear();
  for (cudaEvent_t ev : spare_events_) (void)cudaEventDestroy(ev);
  spare_events_.clear();
  for (auto& [device, s] : streams_) (void)cudaStreamDestroy(s);
  streams_.clear();
  (void)cudaGetLastError();
}

}  // namespace dcomm::transport::cuda_ipc
