#include "collectives/cma_slices.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dcomm/error.hpp>

#include "collectives/dissemination.hpp"
#include "common/deadline.hpp"
#include "common/env.hpp"
#include "common/log.hpp"
#include "transports/shm/shm_cma.hpp"

namespace dcomm::coll {

namespace {

// One piece of a slice: the other rank's piece and the running sum (when it cannot be the output itself) stay
// in a core's L2 (1 MiB on the machines measured) while they are combined.
constexpr std::size_t kPieceBytes = std::size_t{256} << 10;

struct Hello {
  uint64_t input;
  uint64_t work;
  uint64_t probe_addr;   // where this process holds probe_value (the first call checks that peers can read it)
  uint64_t probe_value;
};

int pid_of(const Context& c, int rank) {
  const GroupView& v = c.view;
  int world = v.world_ranks.empty() ? rank : v.world_ranks[static_cast<std::size_t>(rank)];
  return v.mesh->peer(world).pid;
}

CmaStatus read_from(const Context& c, const PeerBuffers& b, int q, uint64_t addr, void* dst, std::size_t bytes) {
  int err = transport::shm::cma_read(b.pid[static_cast<std::size_t>(q)], dst, addr, bytes);
  if (err == 0) return {};
  return CmaStatus{err, c.rank(), q, bytes};
}

}  // namespace

bool cma_allowed_by_env() { return env::get_bool("DCOMM_SHM_CMA", true); }

std::vector<int> other_ranks(const Context& c) {
  std::vector<int> out;
  for (int q = 0; q < c.size(); ++q) {
    if (q != c.rank()) out.push_back(q);
  }
  return out;
}

bool cma_exchange(const Context& c, CmaUse& use, PeerBuffers& out, uint32_t step) {
  const int p = c.size();
  if (use == CmaUse::kNo) return false;
  const Hello mine{reinterpret_cast<uint64_t>(c.input), reinterpret_cast<uint64_t>(c.work),
                   transport::shm::cma_probe_address(), transport::shm::cma_probe_value()};
  std::vector<Hello> all(static_cast<std::size_t>(p));
  all[static_cast<std::size_t>(c.rank())] = mine;
  std::vector<transport::RequestPtr> reqs;
  const std::vector<int> others = other_ranks(c);
  for (int q : others) reqs.push_back(c.irecv(q, step, &all[static_cast<std::size_t>(q)], sizeof(Hello)));
  for (int q : others) reqs.push_back(c.isend(q, step, &mine, sizeof(Hello)));
  c.wait_all(reqs);
  out.input.resize(static_cast<std::size_t>(p));
  out.work.resize(static_cast<std::size_t>(p));
  out.pid.resize(static_cast<std::size_t>(p));
  for (int q = 0; q < p; ++q) {
    out.input[static_cast<std::size_t>(q)] = all[static_cast<std::size_t>(q)].input;
    out.work[static_cast<std::size_t>(q)] = all[static_cast<std::size_t>(q)].work;
    out.pid[static_cast<std::size_t>(q)] = pid_of(c, q);
  }
  if (use == CmaUse::kYes) return true;
  // The first call: may this rank read every other's memory? The lowest rank that may not decides for all.
  int32_t refused = INT32_MAX;
  int err = 0;
  int blocked = -1;
  if (!cma_allowed_by_env()) {
    refused = c.rank();
  } else {
    for (int q : others) {
      const Hello& h = all[static_cast<std::size_t>(q)];
      err = transport::shm::cma_probe(out.pid[static_cast<std::size_t>(q)], h.probe_addr, h.probe_value);
      if (err != 0) {
        refused = c.rank();
        blocked = q;
        break;
      }
    }
  }
  int32_t first = agree(c, step + 1, refused, [](int32_t& m, int32_t t) { m = std::min(m, t); });
  use = first == INT32_MAX ? CmaUse::kYes : CmaUse::kNo;
  if (blocked >= 0) {
    DCOMM_INFO("{}: may not read rank {}'s memory (pid {}): {}; this group reduces through messages instead "
               "(check /proc/sys/kernel/yama/ptrace_scope, or the container's seccomp profile)",
               c.what, blocked, out.pid[static_cast<std::size_t>(blocked)], std::strerror(err));
  } else if (use == CmaUse::kNo && c.rank() == 0) {
    DCOMM_INFO("{}: rank {} may not use cross-memory attach (DCOMM_SHM_CMA=0 or ptrace rules): this group "
               "reduces through messages instead",
               c.what, first);
  }
  return use == CmaUse::kYes;
}

CmaStatus cma_reduce_slice(const Context& c, const PeerBuffers& b, std::size_t offset, std::size_t count) {
  if (count == 0) return {};
  const int p = c.size();
  const int r = c.rank();
  const std::size_t es = c.esize();
  const std::size_t piece = std::min(count, std::max<std::size_t>(1, std::min(c.chunk_elems(), kPieceBytes / es)));
  Scratch tmp = c.scratch(2 * piece);
  char* theirs = tmp.data();
  // Where the output is also this rank's input (in place, or the engine copied it there), rank 0's piece cannot
  // be read straight into it before this rank's own piece is combined: the sum then runs in a buffer of its own.
  char* sum_buf = c.at(tmp.data(), piece);
  const bool out_is_input = c.input == c.work;
  for (std::size_t done = 0; done < count; done += piece) {
    const std::size_t len = std::min(piece, count - done);
    const std::size_t at = offset + done;
    char* out = c.at(c.work, at);
    const char* own = c.at(c.input, at);
    char* acc = out_is_input && r != 0 ? sum_buf : out;
    for (int q = 0; q < p; ++q) {
      const char* src = own;
      if (q != r) {
        char* into = q == 0 ? acc : theirs;
        CmaStatus s = read_from(c, b, q, b.input[static_cast<std::size_t>(q)] + at * es, into, len * es);
        if (!s.ok()) return s;
        src = into;
      }
      if (q == 0) {
        if (src != acc) c.copy(acc, src, len);
      } else {
        c.reduce(acc, src, len);
      }
    }
    if (acc != out) c.copy(out, acc, len);
  }
  return {};
}

CmaStatus cma_fetch(const Context& c, const PeerBuffers& b, int q, std::size_t offset, std::size_t count) {
  if (count == 0) return {};
  return read_from(c, b, q, b.work[static_cast<std::size_t>(q)] + offset * c.esize(), c.at(c.work, offset),
                   count * c.esize());
}

CmaStatus cma_signal(const Context& c, const std::vector<int>& to, const std::vector<int>& from, CmaStatus mine,
                     uint32_t step) {
  std::vector<transport::RequestPtr> sends;
  for (int q : to) sends.push_back(c.isend(q, step, &mine, sizeof(mine)));
  if (!mine.ok()) {
    c.wait_all(sends);
    return mine;
  }
  std::vector<CmaStatus> heard(from.size());
  std::vector<transport::RequestPtr> recvs;
  for (std::size_t i = 0; i < from.size(); ++i) recvs.push_back(c.irecv(from[i], step, &heard[i], sizeof(CmaStatus)));
  c.wait_all(recvs);
  c.wait_all(sends);
  for (const CmaStatus& s : heard) {
    if (!s.ok()) return s;
  }
  return {};
}

void cma_check(const Context& c, const PeerBuffers& b, const CmaStatus& s) {
  if (s.ok()) return;
  const int pid = s.owner >= 0 && static_cast<std::size_t>(s.owner) < b.pid.size()
                      ? b.pid[static_cast<std::size_t>(s.owner)]
                      : -1;
  std::string why = s.err == ESRCH ? fmt::format("process {} (rank {}) exited", pid, s.owner)
                    : s.err == EFAULT
                        ? fmt::format("the buffer rank {} announced is not (or no longer) mapped in its process {}",
                                      s.owner, pid)
                        : std::string(std::strerror(s.err));
  std::string who = s.reader == c.rank() ? "this rank" : fmt::format("rank {}", s.reader);
  throw RemoteError(fmt::format(
      "{}: {} could not read {} of rank {}'s memory (pid {}) with process_vm_readv (cross-memory attach, shm): "
      "{}, {} into the call (timeout {}). Check whether rank {} is still alive (its log); where ptrace rules "
      "forbid the read, set DCOMM_SHM_CMA=0 on every rank",
      c.what, who, format_bytes(s.bytes), s.owner, pid, why, format_duration(c.deadline.elapsed()),
      format_duration(c.deadline.timeout()), s.owner));
}

}  // namespace dcomm::coll
