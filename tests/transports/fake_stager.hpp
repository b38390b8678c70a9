#pragma once
// A stand-in for the CUDA stager, so that staging (transports/staging) is tested on machines without a GPU:
// "device" memory is ordinary host memory labelled cuda:0, and a slot's copy happens only after idle() has been
// polled `lag` times (or when the slot goes), the way an asynchronous device copy lands later. A pipeline that
// sends a chunk before its copy finished, or reuses a slot too early, moves stale bytes and the data checks fail.
// It can also be told to fail its Nth copy, to test how a failed device copy is reported.

#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include <dcomm/error.hpp>

#include "transports/staging/stager.hpp"

namespace dcomm::test {

class FakeStager final : public transport::staging::Stager {
 public:
  FakeStager(std::size_t chunk_bytes, int depth, int lag = 2, long fail_copy = -1)
      : chunk_bytes_(chunk_bytes), depth_(depth), lag_(lag), fail_copy_(fail_copy) {}

  bool handles(const Device& d) const override { return d.kind == Device::Kind::kCuda; }
  std::size_t chunk_bytes() const override { return chunk_bytes_; }
  int depth() const override { return depth_; }
  std::unique_ptr<transport::staging::Slot> slot(const Device& device) override;

  int live_slots() const { return live_.load(); }
  long copies() const { return copies_.load(); }

 private:
  class FakeSlot;
  std::size_t chunk_bytes_;
  int depth_, lag_;
  long fail_copy_;
  std::atomic<int> live_{0};
  std::atomic<long> copies_{0};
};

class FakeStager::FakeSlot final : public transport::staging::Slot {
 public:
  explicit FakeSlot(FakeStager& owner) : owner_(owner), host_(owner.chunk_bytes_) { ++owner_.live_; }
  ~FakeSlot() override {
    if (pending_) std::memcpy(dst_, src_, bytes_);  // like the CUDA slot, which waits for its copy
    --owner_.live_;
  }
  void* host() override { return host_.data(); }
  void to_host(const void* src, std::size_t bytes) override { queue(host_.data(), src, bytes); }
  void to_device(void* dst, std::size_t bytes) override { queue(dst, host_.data(), bytes); }
  bool idle() override {
    if (!pending_) return true;
    if (--countdown_ > 0) return false;
    pending_ = false;
    if (doomed_) throw Error(ErrorCode::kCudaError, "fake device copy failed (as the test asked)");
    std::memcpy(dst_, src_, bytes_);
    return true;
  }

 private:
  void queue(void* dst, const void* src, std::size_t bytes) {
    if (pending_) throw Error(ErrorCode::kInternal, "fake stager: a copy was queued on a slot whose copy is pending");
    if (bytes > host_.size()) throw Error(ErrorCode::kInternal, "fake stager: a copy larger than the chunk");
    dst_ = dst;
    src_ = src;
    bytes_ = bytes;
    pending_ = true;
    countdown_ = owner_.lag_;
    doomed_ = owner_.copies_.fetch_add(1) == owner_.fail_copy_;
  }
  FakeStager& owner_;
  std::vector<char> host_;
  void* dst_ = nullptr;
  const void* src_ = nullptr;
  std::size_t bytes_ = 0;
  bool pending_ = false, doomed_ = false;
  int countdown_ = 0;
};

inline std::unique_ptr<transport::staging::Slot> FakeStager::slot(const Device&) {
  return std::make_unique<FakeSlot>(*this);
}

}  // namespace dcomm::test
