#include "transports/shm/shm_ring.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace dcomm::transport::shm {

Ring::Ring(void* base, uint64_t capacity)
    : ctl_(static_cast<RingControl*>(base)),
      data_(static_cast<char*>(base) + kRingControlBytes),
      capacity_(capacity) {}

void Ring::init() {
  new (ctl_) RingControl{};
  ctl_->head.store(0, std::memory_order_relaxed);
  ctl_->tail.store(0, std::memory_order_relaxed);
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
  uint64_t head = ctl_->head.load(std::memory_order_relaxed);
  uint64_t need = record_bytes(h.len);
  uint64_t pos = head % capacity_;
  uint64_t to_end = capacity_ - pos;
  uint64_t pad = need > to_end ? to_end : 0;
  if (head + pad + need - cached_tail_ > capacity_) {
    cached_tail_ = ctl_->tail.load(std::memory_order_acquire);
    if (head + pad + need - cached_tail_ > capacity_) return false;
  }
  if (pad != 0) {
    // The pad's header is all the consumer reads; it tells it to go back to offset 0.
    RecordHeader p;
    std::memcpy(data_ + pos, &p, sizeof(p));
    head += pad;
    pos = 0;
  }
  std::memcpy(data_ + pos, &h, sizeof(h));
  if (h.len != 0) std::memcpy(data_ + pos + kRecordAlign, payload, h.len);
  ctl_->head.store(head + need, std::memory_order_release);
  return true;
}

const RecordHeader* Ring::peek() {
  for (;;) {
    uint64_t tail = ctl_->tail.load(std::memory_order_relaxed);
    uint64_t pos = tail % capacity_;
    auto* h = reinterpret_cast<const RecordHeader*>(data_ + pos);
    // The next record's header and first payload line are fetched while head is: a poll that finds the producer's
    // new head finds its record on the way, instead of missing on it after the branch (the three lines a small
    // message touches - head, header, payload - in flight together, not one after another). A prefetch reads
    // nothing into the program: stale lines are fetched again once the producer writes them.
    __builtin_prefetch(h);
    __builtin_prefetch(reinterpret_cast<const char*>(h) + kRecordAlign);
    if (tail == ctl_->head.load(std::memory_order_acquire)) return nullptr;
    if (h->kind != RecordKind::kPad) return h;
    ctl_->tail.store(tail + (capacity_ - pos), std::memory_order_release);
  }
}

void Ring::pop() {
  uint64_t tail = ctl_->tail.load(std::memory_order_relaxed);
  auto* h = reinterpret_cast<const RecordHeader*>(data_ + tail % capacity_);
  ctl_->tail.store(tail + record_bytes(h->len), std::memory_order_release);
}

}  // namespace dcomm::transport::shm
