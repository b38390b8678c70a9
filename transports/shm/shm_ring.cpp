#include "transports/shm/shm_ring.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>

namespace dcomm::transport::shm {

Ring::Ring(void* base, uint64_t capacity)
    : ctl_(static_cast<RingControl*>(base)),
      lane_(static_cast<char*>(base) + kRingControlBytes),
      data_(static_cast<char*>(base) + kRingControlBytes + kLaneBytes),
      capacity_(capacity),
      key_(ctl_ != nullptr ? ctl_->key : 0) {}

namespace {

uint64_t load_stamp(const char* at) {
  auto* h = const_cast<RecordHeader*>(reinterpret_cast<const RecordHeader*>(at));
  return std::atomic_ref<uint64_t>(h->stamp).load(std::memory_order_acquire);
}

// A header goes in without its stamp, then the stamp (a release store): what the consumer waits for.
void put(char* at, const RecordHeader& h, uint64_t stamp) {
  std::memcpy(at, &h, offsetof(RecordHeader, stamp));
  std::atomic_ref<uint64_t>(reinterpret_cast<RecordHeader*>(at)->stamp).store(stamp, std::memory_order_release);
}

}  // namespace

void Ring::init() {
  new (ctl_) RingControl{};
  for (auto* c : {&ctl_->head, &ctl_->lane_head, &ctl_->seq, &ctl_->tail, &ctl_->lane_tail, &ctl_->next}) {
    c->store(0, std::memory_order_relaxed);
  }
  // The top bit set: record numbers stay below 2^63, so no stamp is 0 (a line never written).
  std::random_device rd;
  const uint64_t drawn = (uint64_t{rd()} << 32) ^ rd() ^
                         static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  ctl_->key = drawn | (uint64_t{1} << 63);
  key_ = ctl_->key;
}

void Ring::prefault() const noexcept {
  if (ctl_ == nullptr) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(ctl_) / page * page;
  const auto end = reinterpret_cast<uintptr_t>(data_) + capacity_;
#ifdef MADV_POPULATE_WRITE
  if (::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0) return;
#endif
  // Older kernels: a read maps a page of shared memory as well, and cannot disturb records already in flight.
  for (uintptr_t at = begin; at < end; at += page) (void)*reinterpret_cast<const volatile char*>(at);
}

bool Ring::try_write(const RecordHeader& h, const void* payload) {
  const bool inline_payload = h.kind == RecordKind::kEager && h.len <= kInlineBytes;
  RecordHeader w = h;
  if (inline_payload) {
    w.flags |= kInlinePayload;
    if (h.len != 0) std::memcpy(reinterpret_cast<char*>(&w) + offsetof(RecordHeader, msg_id), payload, h.len);
  }
  const uint64_t seq = ctl_->seq.load(std::memory_order_relaxed);
  if (inline_payload || h.len == 0) {
    const uint64_t lane_head = ctl_->lane_head.load(std::memory_order_relaxed);
    if (lane_head + kRecordAlign - cached_lane_tail_ > kLaneBytes) {
      cached_lane_tail_ = ctl_->lane_tail.load(std::memory_order_acquire);
    }
    if (lane_head + kRecordAlign - cached_lane_tail_ <= kLaneBytes) {
      put(lane_ + lane_head % kLaneBytes, w, stamp_of(seq));
      ctl_->lane_head.store(lane_head + kRecordAlign, std::memory_order_relaxed);
      ctl_->seq.store(seq + 1, std::memory_order_relaxed);
      return true;
    }
    // The lane is full (a burst the consumer has not taken yet): the ring, in order all the same.
  }
  uint64_t head = ctl_->head.load(std::memory_order_relaxed);
  uint64_t need = record_bytes(w);
  uint64_t pos = head % capacity_;
  uint64_t to_end = capacity_ - pos;
  uint64_t pad = need > to_end ? to_end : 0;
  if (head + pad + need - cached_tail_ > capacity_) {
    cached_tail_ = ctl_->tail.load(std::memory_order_acquire);
    if (head + pad + need - cached_tail_ > capacity_) return false;
  }
  if (pad != 0) {
    // The pad's header is all the consumer reads; it tells it to go back to offset 0, where the record of the same
    // number follows.
    put(data_ + pos, RecordHeader{}, stamp_of(seq));
    head += pad;
    pos = 0;
  }
  if (h.kind == RecordKind::kData) {
    // A stream's piece: the copy's time goes in the header (RecordHeader::tag), for the receiver's cost of the stream.
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(data_ + pos + kRecordAlign, payload, h.len);
    w.tag = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  } else if (!inline_payload && h.len != 0) {
    std::memcpy(data_ + pos + kRecordAlign, payload, h.len);
  }
  put(data_ + pos, w, stamp_of(seq));
  ctl_->head.store(head + need, std::memory_order_relaxed);  // the producer's own counts: nobody waits on them
  ctl_->seq.store(seq + 1, std::memory_order_relaxed);
  return true;
}

const RecordHeader* Ring::peek() {
  const uint64_t want = stamp_of(ctl_->next.load(std::memory_order_relaxed));
  const char* lane_at = lane_ + ctl_->lane_tail.load(std::memory_order_relaxed) % kLaneBytes;
  if (load_stamp(lane_at) == want) {
    in_lane_ = true;
    return reinterpret_cast<const RecordHeader*>(lane_at);
  }
  for (;;) {
    uint64_t tail = ctl_->tail.load(std::memory_order_relaxed);
    uint64_t pos = tail % capacity_;
    const char* at = data_ + pos;
    if (load_stamp(at) != want) return nullptr;
    auto* h = reinterpret_cast<const RecordHeader*>(at);
    if (h->kind != RecordKind::kPad) {
      in_lane_ = false;
      return h;
    }
    ctl_->tail.store(tail + (capacity_ - pos), std::memory_order_release);
  }
}

void Ring::pop() {
  ctl_->next.store(ctl_->next.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (in_lane_) {  // a lane record is one line
    ctl_->lane_tail.store(ctl_->lane_tail.load(std::memory_order_relaxed) + kRecordAlign, std::memory_order_release);
    return;
  }
  const uint64_t tail = ctl_->tail.load(std::memory_order_relaxed);
  const auto* h = reinterpret_cast<const RecordHeader*>(data_ + tail % capacity_);
  ctl_->tail.store(tail + record_bytes(*h), std::memory_order_release);
}

}  // namespace dcomm::transport::shm
