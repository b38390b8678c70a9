#include "transports/cuda_ipc/control_ring.hpp"

#include <dcomm/error.hpp>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

namespace dcomm::transport::cuda_ipc {

// Both processes map the same pages; 64-bit atomics are lock-free and therefore address-free on every target
// dcomm builds for, so std::atomic_ref works across the processes.
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free);

bool ring_push(Ring& ring, const ControlRecord& rec) noexcept {
  const uint64_t head = std::atomic_ref<uint64_t>(ring.head).load(std::memory_order_relaxed);
  const uint64_t tail = std::atomic_ref<uint64_t>(ring.tail).load(std::memory_order_acquire);
  if (head - tail >= Ring::kSlots) return false;
  ring.slots[head % Ring::kSlots] = rec;
  std::atomic_ref<uint64_t>(ring.head).store(head + 1, std::memory_order_release);
  return true;
}

bool ring_pop(Ring& ring, ControlRecord* rec) noexcept {
  const uint64_t tail = std::atomic_ref<uint64_t>(ring.tail).load(std::memory_order_relaxed);
  const uint64_t head = std::atomic_ref<uint64_t>(ring.head).load(std::memory_order_acquire);
  if (tail == head) return false;
  *rec = ring.slots[tail % Ring::kSlots];
  std::atomic_ref<uint64_t>(ring.tail).store(tail + 1, std::memory_order_release);
  return true;
}

namespace {

void* map_fd(int fd, std::size_t size, const std::string& name) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED) throw SystemError("cuda_ipc: mmap of control segment " + name, err);
  return p;
}

}  // namespace

ControlSegment ControlSegment::create(const std::string& name, int rings) {
  ControlSegment seg;
  seg.name_ = name;
  seg.size_ = sizeof(Ring) * static_cast<std::size_t>(rings);
  shm_unlink(name.c_str());  // a segment left by a crashed run of the same world id
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw SystemError("cuda_ipc: shm_open(" + name + ") to create the control segment", errno);
  seg.owner_ = true;  // from here on the destructor unlinks the name
  if (ftruncate(fd, static_cast<off_t>(seg.size_)) != 0) {
    int err = errno;
    close(fd);
    throw SystemError("cuda_ipc: ftruncate of control segment " + name + " (check /dev/shm's free space)", err);
  }
  seg.base_ = map_fd(fd, seg.size_, name);  // fresh pages read as zero: every ring starts empty
  return seg;
}

ControlSegment ControlSegment::open(const std::string& name, int rings) {
  ControlSegment seg;
  seg.name_ = name;
  seg.size_ = sizeof(Ring) * static_cast<std::size_t>(rings);
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throw SystemError("cuda_ipc: shm_open(" + name + ") of a peer's control segment", errno);
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < seg.size_) {
    close(fd);
    throw InvalidUsageError("cuda_ipc: control segment " + name + " is smaller than " + std::to_string(seg.size_) +
                            " bytes; the peer runs with another world size - check that every rank has the same "
                            "WORLD_SIZE");
  }
  seg.base_ = map_fd(fd, seg.size_, name);
  return seg;
}

ControlSegment::ControlSegment(ControlSegment&& other) noexcept { *this = std::move(other); }

ControlSegment& ControlSegment::operator=(ControlSegment&& other) noexcept {
  if (this != &other) {
    release();
    name_ = std::move(other.name_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owner_ = std::exchange(other.owner_, false);
  }
  return *this;
}

ControlSegment::~ControlSegment() { release(); }

void ControlSegment::release() noexcept {
  if (base_ != nullptr) munmap(base_, size_);
  if (owner_) shm_unlink(name_.c_str());
  base_ = nullptr;
  owner_ = false;
}

}  // namespace dcomm::transport::cuda_ipc
