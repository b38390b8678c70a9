#include "transports/shm/shm_segment.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include <dcomm/error.hpp>

#include "common/deadline.hpp"

namespace dcomm::transport::shm {
namespace {

uint64_t ring_stride(uint64_t ring_bytes) { return kRingControlBytes + kLaneBytes + ring_bytes; }

void* map_fd(int fd, uint64_t size, const std::string& name) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    ::close(fd);
    throw SystemError(fmt::format("shm: mmap of {} ({}) failed", name, format_bytes(size)), err);
  }
  ::close(fd);
  return p;
}

}  // namespace

std::string segment_name(const std::string& world_id, int rank) { return fmt::format("/dcomm-{}-{}", world_id, rank); }

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    release();
    name_ = std::move(o.name_);
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
    owner_ = std::exchange(o.owner_, false);
    linked_ = std::exchange(o.linked_, false);
  }
  return *this;
}

Segment Segment::create(const std::string& name, int owner_rank, int world_size, uint64_t ring_bytes) {
  uint64_t size = kSegmentHeaderBytes + static_cast<uint64_t>(world_size) * ring_stride(ring_bytes);
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw SystemError(fmt::format("shm: creating segment {} failed", name), errno);
  Segment s;
  s.name_ = name;
  s.owner_ = true;
  s.linked_ = true;
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int err = errno;
    ::close(fd);
    s.unlink();
    throw SystemError(fmt::format("shm: sizing segment {} to {} failed (is /dev/shm full?)", name,
                                  format_bytes(size)), err);
  }
  s.base_ = map_fd(fd, size, name);
  s.size_ = size;
  auto* h = new (s.base_) SegmentHeader{};
  h->magic = kSegmentMagic;
  h->ring_bytes = ring_bytes;
  h->owner_rank = owner_rank;
  h->owner_pid = static_cast<int32_t>(::getpid());
  h->world_size = world_size;
  h->closed.store(0, std::memory_order_relaxed);
  for (int w = 0; w < world_size; ++w) s.ring(w).init();
  return s;
}

Segment Segment::open(const std::string& name, int expect_rank) {
  int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    throw SystemError(fmt::format("shm: opening rank {}'s segment {} failed (did it exit, or run as another "
                                  "user?)", expect_rank, name), errno);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw SystemError(fmt::format("shm: fstat of {} failed", name), err);
  }
  Segment s;
  s.name_ = name;
  s.size_ = static_cast<uint64_t>(st.st_size);
  if (s.size_ < kSegmentHeaderBytes) {
    ::close(fd);
    throw Error(ErrorCode::kInternal, fmt::format("shm: segment {} is only {} bytes", name, s.size_));
  }
  s.base_ = map_fd(fd, s.size_, name);
  const SegmentHeader* h = s.header();
  if (h->magic != kSegmentMagic || h->owner_rank != expect_rank ||
      s.size_ != kSegmentHeaderBytes + static_cast<uint64_t>(h->world_size) * ring_stride(h->ring_bytes)) {
    throw Error(ErrorCode::kInternal,
                fmt::format("shm: segment {} is not rank {}'s (magic {:x}, owner {}); a stale segment from an "
                            "earlier job?",
                            name, expect_rank, h->magic, h->owner_rank));
  }
  return s;
}

Ring Segment::ring(int writer) const {
  uint64_t rb = header()->ring_bytes;
  return Ring(static_cast<char*>(base_) + kSegmentHeaderBytes + static_cast<uint64_t>(writer) * ring_stride(rb), rb);
}

void Segment::unlink() noexcept {
  if (owner_ && linked_) {
    ::shm_unlink(name_.c_str());
    linked_ = false;
  }
}

void Segment::release() noexcept {
  unlink();
  if (base_ != nullptr) ::munmap(base_, size_);
  base_ = nullptr;
}

}  // namespace dcomm::transport::shm
