#include "collectives/shm_segments.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <dcomm/error.hpp>

#include "collectives/dissemination.hpp"
#include "collectives/topology.hpp"
#include "common/log.hpp"

namespace dcomm::coll {

namespace {

int world_rank_of(const GroupView& v, int rank) {
  return v.world_ranks.empty() ? rank : v.world_ranks[static_cast<std::size_t>(rank)];
}

}  // namespace

bool group_on_one_host(const GroupView& view) {
  if (!view.mesh) return false;
  if (view.hierarchy) return view.hierarchy->topo.node_count() == 1;  // the group's own reading of the host ids
  const std::string& mine = view.mesh->peer(world_rank_of(view, view.rank)).host_id;
  for (int i = 0; i < view.size; ++i) {
    if (view.mesh->peer(world_rank_of(view, i)).host_id != mine) return false;
  }
  return true;
}

ShmWindows::ShmWindows(const Context& c, std::size_t bytes)
    : bytes_(bytes), rank_(c.rank()), segments_(static_cast<std::size_t>(c.size()), nullptr) {
  for (int q = 0; q < c.size(); ++q) {
    int world = world_rank_of(c.view, q);
    names_.push_back(
        fmt::format("/dcomm-coll-{}-w{}-c{}-s{}", c.view.mesh->peer(world).pid, world, c.view.context, c.seq));
  }
  segments_[static_cast<std::size_t>(rank_)] = map(c, rank_, true);
  linked_ = true;
}

ShmWindows::~ShmWindows() {
  unlink_mine();
  for (char* p : segments_) {
    if (p != nullptr) ::munmap(p, bytes_);
  }
}

char* ShmWindows::map(const Context& c, int rank, bool create) {
  const std::string& name = names_[static_cast<std::size_t>(rank)];
  int fd = -1;
  if (create) {
    fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && errno == EEXIST) {  // left behind by a process that died with this pid: take it over
      ::shm_unlink(name.c_str());
      fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    }
    // posix_fallocate reserves the pages: a full /dev/shm fails here instead of raising SIGBUS on first touch.
    int err = fd >= 0 ? ::posix_fallocate(fd, 0, static_cast<off_t>(bytes_)) : 0;
    if (err != 0) {
      ::close(fd);
      ::shm_unlink(name.c_str());
      throw SystemError(fmt::format("{}: reserving {} for shared-memory segment {} (is /dev/shm full?)", c.what,
                                    format_bytes(bytes_), name),
                        err);
    }
  } else {
    fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  }
  if (fd < 0) {
    throw SystemError(
        fmt::format("{}: shm_open of {} ({} of rank {})", c.what, name, create ? "own segment" : "segment", rank),
        errno);
  }
  // Populate the page tables at once, the owner's as well as the peers': one call instead of a page fault per 4 KiB
  // (the pages are reserved above, so this costs no memory). The owner's was left to faults, and a slot ring took
  // one per exchange of more than a head's bytes for its first kSlotDepth calls: all_to_all[cma] of 64 KiB on 2
  // ranks bound 4.5-5.5 us a call for ~130 calls, then 3.5, and the tuner, measuring in those calls, chose bruck.
  int flags = MAP_SHARED | MAP_POPULATE;
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, flags, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    if (create) ::shm_unlink(name.c_str());
    throw SystemError(fmt::format("{}: mmap of {} ({})", c.what, name, format_bytes(bytes_)), err);
  }
  return static_cast<char*>(p);
}

void ShmWindows::map_peers(const Context& c) {
  for (int q = 0; q < c.size(); ++q) {
    if (q != rank_) segments_[static_cast<std::size_t>(q)] = map(c, q, false);
  }
}

void ShmWindows::unlink_mine() noexcept {
  if (linked_) ::shm_unlink(names_[static_cast<std::size_t>(rank_)].c_str());
  linked_ = false;
}

std::unique_ptr<ShmWindows> open_windows(const Context& c, std::size_t bytes, uint32_t step, std::string_view instead) {
  std::unique_ptr<ShmWindows> win;
  std::string why;
  try {
    win = std::make_unique<ShmWindows>(c, bytes);
  } catch (const Error& e) {
    why = e.what();
  }
  // Agree on the lowest rank that failed, so that every rank changes course alike.
  int32_t failed =
      agree(c, step, why.empty() ? INT32_MAX : c.rank(), [](int32_t& m, int32_t t) { m = std::min(m, t); });
  if (failed != INT32_MAX) {
    if (!why.empty()) DCOMM_WARN("{}; {} falls back to {} on this group", why, c.what, instead);
    if (c.rank() == 0) {
      DCOMM_WARN("{}: rank {} could not create its shared-memory window: using {}", c.what, failed, instead);
    }
    return nullptr;
  }
  win->map_peers(c);
  agree(c, step + static_cast<uint32_t>(pattern::ceil_log2(c.size())), uint8_t{0}, [](uint8_t&, uint8_t) {});
  win->unlink_mine();
  return win;
}

}  // namespace dcomm::coll
