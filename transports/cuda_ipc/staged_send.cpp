#include "transports/cuda_ipc/staged_send.hpp"

#include <dcomm/error.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "common/log.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"

namespace dcomm::transport::cuda_ipc {

using Layout = StagingLayout;

StagedSender::StagedSender(int self_rank, int world_size, PostRecord post)
    : self_(self_rank), post_(std::move(post)), channels_(static_cast<std::size_t>(world_size)) {}

StagedSender::Channel& StagedSender::channel(int peer, int device) {
  std::unique_ptr<Channel>& slot = channels_.at(static_cast<std::size_t>(peer));
  if (slot) return *slot;
  auto c = std::make_unique<Channel>();
  c->device = device;
  cuda::DeviceGuard guard(device);
  const std::string what = fmt::format("cuda_ipc rank {}: staging buffer of {} for rank {} on cuda:{}", self_,
                                       format_bytes(Layout::kBufferBytes), peer, device);
  try {
    cuda::check(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), what + ": cudaStreamCreate");
    cuda::check(cudaMalloc(&c->buffer, Layout::kBufferBytes), what + ": cudaMalloc");
    cuda::check(cudaIpcGetMemHandle(&c->handle, c->buffer), what + ": cudaIpcGetMemHandle");
    for (Slot& s : c->slots) {
      cuda::check(cudaEventCreateWithFlags(&s.event, cudaEventDisableTiming), what + ": cudaEventCreate");
    }
  } catch (...) {
    for (Slot& s : c->slots) {
      if (s.event != nullptr) (void)cudaEventDestroy(s.event);
    }
    if (c->buffer != nullptr) (void)cudaFree(c->buffer);
    if (c->stream != nullptr) (void)cudaStreamDestroy(c->stream);
    throw;
  }
  DCOMM_DEBUG("{}: created for memory that legacy IPC cannot export", what);
  slot = std::move(c);
  return *slot;
}

StagedSender::Channel* StagedSender::find(int peer) noexcept {
  if (peer < 0 || static_cast<std::size_t>(peer) >= channels_.size()) return nullptr;
  return channels_[static_cast<std::size_t>(peer)].get();
}

void StagedSender::add(int peer, uint64_t seq, const void* src, std::size_t bytes, int device) {
  Channel& c = channel(peer, device);
  c.sends.emplace(seq, Send{static_cast<const char*>(src), bytes});
}

void StagedSender::go(int peer, uint64_t seq) {
  Channel* c = find(peer);
  if (c == nullptr || c->sends.count(seq) == 0) {
    // The send already ended here (it failed, or the transport is closing): the receiver learns from its ack/cancel.
    DCOMM_DEBUG("cuda_ipc rank {}: go for staged message {} from rank {}, which is no longer sending", self_, seq,
                peer);
    return;
  }
  c->streaming.push_back(seq);
}

void StagedSender::slot_free(int peer, uint64_t offset) {
  Channel* c = find(peer);
  const std::size_t index = offset / Layout::kChunkBytes;
  if (c == nullptr || offset % Layout::kChunkBytes != 0 || index >= Layout::kSlots ||
      c->slots[index].state != SlotState::kPosted) {
    DCOMM_WARN("cuda_ipc rank {}: rank {} returned staging slot at offset {}, which was not handed to it", self_,
               peer, offset);
    return;
  }
  c->slots[index].state = SlotState::kFree;
}

void StagedSender::forget(int peer, uint64_t seq) noexcept {
  Channel* c = find(peer);
  if (c == nullptr) return;
  c->sends.erase(seq);
  c->streaming.erase(std::remove(c->streaming.begin(), c->streaming.end(), seq), c->streaming.end());
}

void StagedSender::abort_send(int peer, uint64_t seq, std::exception_ptr error, const FailSend& fail) {
  forget(peer, seq);
  ControlRecord rec;
  rec.kind = ControlRecord::kCancel;
  rec.seq = seq;
  post_(peer, rec);
  fail(peer, seq, std::move(error));
}

// Slots whose copy into staging finished go to the receiver; a copy of a send that ended meanwhile frees its slot.
bool StagedSender::post_copied(int peer, Channel& c, const FailSend& fail) {
  bool any = false;
  for (std::size_t i = 0; i < c.slots.size(); ++i) {
    Slot& s = c.slots[i];
    if (s.state != SlotState::kCopying) continue;
    cudaError_t err = cudaEventQuery(s.event);
    if (err == cudaErrorNotReady) continue;
    any = true;
    s.state = SlotState::kFree;
    if (c.sends.count(s.seq) == 0) continue;
    if (err != cudaSuccess) {
      try {
        cuda::throw_error(err, fmt::format("cuda_ipc rank {}: copy of {} into the staging buffer for rank {}", self_,
                                           format_bytes(s.bytes), peer));
      } catch (...) {
        abort_send(peer, s.seq, std::current_exception(), fail);
      }
      continue;
    }
    ControlRecord rec;
    rec.kind = ControlRecord::kChunk;
    rec.seq = s.seq;
    rec.bytes = s.bytes;
    rec.position = s.position;
    rec.base = reinterpret_cast<uint64_t>(c.buffer);
    rec.offset = i * Layout::kChunkBytes;
    rec.handle = c.handle;
    s.state = SlotState::kPosted;
    post_(peer, rec);
  }
  return any;
}

// Free slots take the next chunks of the messages whose receiver said go, oldest first.
bool StagedSender::fill_slots(int peer, Channel& c, const FailSend& fail) {
  bool any = false;
  for (std::size_t i = 0; i < c.slots.size() && !c.streaming.empty(); ++i) {
    Slot& s = c.slots[i];
    if (s.state != SlotState::kFree) continue;
    const uint64_t seq = c.streaming.front();
    Send& send = c.sends.at(seq);
    const std::size_t n = std::min(Layout::kChunkBytes, send.bytes - send.next);
    char* dst = static_cast<char*>(c.buffer) + i * Layout::kChunkBytes;
    cudaError_t err = cudaMemcpyAsync(dst, send.src + send.next, n, cudaMemcpyDefault, c.stream);
    if (err == cudaSuccess) err = cudaEventRecord(s.event, c.stream);
    any = true;
    if (err != cudaSuccess) {
      // The slot's event may not be recorded: it stays free, and is safe to reuse since nothing was queued after it.
      try {
        cuda::throw_error(err, fmt::format("cuda_ipc rank {}: queueing a copy of {} into the staging buffer for "
                                           "rank {}", self_, format_bytes(n), peer));
      } catch (...) {
        abort_send(peer, seq, std::current_exception(), fail);
      }
      continue;
    }
    s.state = SlotState::kCopying;
    s.seq = seq;
    s.position = send.next;
    s.bytes = n;
    send.next += n;
    if (send.next == send.bytes) c.streaming.pop_front();  // every chunk queued; the send waits for its ack
  }
  return any;
}

bool StagedSender::progress(const FailSend& fail) {
  bool any = false;
  for (std::size_t peer = 0; peer < channels_.size(); ++peer) {
    Channel* c = channels_[peer].get();
    if (c == nullptr) continue;
    any |= post_copied(static_cast<int>(peer), *c, fail);
    if (c->streaming.empty()) continue;
    cuda::DeviceGuard guard(c->device);  // copies go on the staging buffer's device
    any |= fill_slots(static_cast<int>(peer), *c, fail);
  }
  return any;
}

void StagedSender::close() noexcept {
  for (std::unique_ptr<Channel>& c : channels_) {
    if (!c) continue;
    (void)cudaStreamSynchronize(c->stream);  // copies into staging always end; nothing here waits on a peer
    for (Slot& s : c->slots) (void)cudaEventDestroy(s.event);
    try {
      cuda::DeviceGuard guard(c->device);
      (void)cudaFree(c->buffer);
    } catch (...) {
      // No usable device any more: the driver reclaims the buffer with the process.
    }
    (void)cudaStreamDestroy(c->stream);
    c.reset();
  }
  (void)cudaGetLastError();
}

}  // namespace dcomm::transport::cuda_ipc
