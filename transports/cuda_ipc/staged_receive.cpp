#include "transports/cuda_ipc/staged_receive.hpp"

#include <dcomm/error.hpp>
#include <fmt/format.h>

#include <string>

#include "common/log.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"

namespace dcomm::transport::cuda_ipc {

StagedReceiver::StagedReceiver(int self_rank, PostRecord post, ImportCache& imports, CopyEngine& copies)
    : self_(self_rank), post_(std::move(post)), imports_(imports), copies_(copies) {}

void StagedReceiver::start(int peer, uint64_t seq, void* dst, std::size_t bytes, int device, OpPtr op) {
  const Key key{peer, seq};
  receives_.emplace(key, Receive{static_cast<char*>(dst), bytes, device, std::move(op)});
  if (bytes == 0) return finish(key, nullptr);  // senders stage only non-empty messages; be safe anyway
  ControlRecord rec;
  rec.kind = ControlRecord::kGo;
  rec.seq = seq;
  post_(peer, rec);
}

void StagedReceiver::free_slot(int peer, uint64_t offset) {
  ControlRecord rec;
  rec.kind = ControlRecord::kSlotFree;
  rec.offset = offset;
  post_(peer, rec);
}

void StagedReceiver::finish(const Key& key, std::exception_ptr error) {
  auto it = receives_.find(key);
  if (it == receives_.end()) return;
  Receive r = std::move(it->second);
  receives_.erase(it);
  ControlRecord rec;
  rec.kind = ControlRecord::kAck;
  rec.seq = key.second;
  rec.failed = error ? 1 : 0;
  if (error) {
    r.op->fail(std::move(error));
  } else {
    r.op->complete(r.bytes);
  }
  post_(key.first, rec);
}

void StagedReceiver::chunk(int peer, const ControlRecord& rec) {
  const Key key{peer, rec.seq};
  auto it = receives_.find(key);
  if (it == receives_.end()) {
    free_slot(peer, rec.offset);  // the receive failed or was cancelled after the sender queued this chunk
    return;
  }
  Receive& r = it->second;
  if (rec.bytes == 0 || rec.position > r.bytes || rec.bytes > r.bytes - rec.position) {
    free_slot(peer, rec.offset);
    return finish(key, std::make_exception_ptr(Error(ErrorCode::kInternal, fmt::format(
        "cuda_ipc rank {}: rank {} sent a chunk of {} at {} for a staged message of {}; the two ranks disagree "
        "about the message - check that they run the same dcomm", self_, peer, format_bytes(rec.bytes),
        rec.position, format_bytes(r.bytes)))));
  }
  try {
    cuda::DeviceGuard guard(r.device);
    const char* staging = static_cast<const char*>(imports_.open(peer, rec.base, rec.handle));
    copies_.start(r.device, r.dst + rec.position, staging + rec.offset, rec.bytes,
                  FinishedCopy{peer, rec.seq, rec.bytes, nullptr, nullptr, true, rec.offset},
                  fmt::format("cuda_ipc rank {}: copy of a {} chunk of a staged message from rank {}", self_,
                              format_bytes(rec.bytes), peer));
    ++r.in_flight;
  } catch (...) {
    free_slot(peer, rec.offset);
    finish(key, std::current_exception());
  }
}

void StagedReceiver::copied(const FinishedCopy& f, std::exception_ptr error) {
  free_slot(f.peer, f.slot_offset);
  const Key key{f.peer, f.seq};
  auto it = receives_.find(key);
  if (it == receives_.end()) return;  // the receive already failed; this copy only held its slot
  Receive& r = it->second;
  --r.in_flight;
  if (error) return finish(key, std::move(error));
  r.copied += f.bytes;
  if (r.copied == r.bytes && r.in_flight == 0) finish(key, nullptr);
}

void StagedReceiver::cancel(int peer, uint64_t seq) {
  auto it = receives_.find(Key{peer, seq});
  if (it == receives_.end()) {
    DCOMM_DEBUG("cuda_ipc rank {}: rank {} cancelled staged message {}, which is not being received", self_, peer,
                seq);
    return;
  }
  it->second.op->fail(std::make_exception_ptr(RemoteError(fmt::format(
      "cuda_ipc rank {}: rank {} could not copy its {} message into its staging buffer - check rank {}'s log",
      self_, peer, format_bytes(it->second.bytes), peer))));
  receives_.erase(it);  // no ack: the sender has already given the message up
}

void StagedReceiver::close() noexcept {
  for (auto& [key, r] : receives_) {
    r.op->fail(std::make_exception_ptr(AbortedError(fmt::format(
        "cuda_ipc rank {}: staged receive of {} from rank {} aborted: the transport closed first", self_,
        format_bytes(r.bytes), key.first))));
  }
  receives_.clear();
}

}  // namespace dcomm::transport::cuda_ipc
