// The single-copy algorithms' common steps (see cma_peers.hpp).
#include "collectives/cma_peers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <dcomm/error.hpp>
#include <exception>

#include "collectives/call_check.hpp"
#include "collectives/dissemination.hpp"
#include "collectives/ride.hpp"
#include "collectives/slots.hpp"
#include "common/deadline.hpp"
#include "common/env.hpp"
#include "common/log.hpp"
#include "transports/shm/shm_cma.hpp"

namespace dcomm::coll {

namespace {

int pid_of(const Context& c, int rank) {
  const GroupView& v = c.view;
  int world = v.world_ranks.empty() ? rank : v.world_ranks[static_cast<std::size_t>(rank)];
  return v.mesh->peer(world).pid;
}

std::vector<int> other_ranks(const Context& c) {
  std::vector<int> out;
  for (int q = 0; q < c.size(); ++q) {
    if (q != c.rank()) out.push_back(q);
  }
  return out;
}

}  // namespace

// Step 1: the addresses; on the first call also the agreement (steps step + 1 ...).
bool cma_exchange(const Context& c, CmaUse& use, const void* input, const void* work, CmaPeers& peers, uint32_t step) {
  if (use == CmaUse::kNo) {
    if (c.call != nullptr) check_calls_match(c, c.call);  // the fallback does not carry it
    return false;
  }
  const int p = c.size();
  const CmaHello mine{reinterpret_cast<uint64_t>(input), reinterpret_cast<uint64_t>(work),
                   transport::shm::cma_probe_address(), transport::shm::cma_probe_value()};
  peers.hello.assign(static_cast<std::size_t>(p), mine);
  peers.pid.resize(static_cast<std::size_t>(p));
  const std::vector<int> others = other_ranks(c);
  if (c.view.slots != nullptr && c.call == nullptr) {
    // A group with slots had its call checked in them (or runs with checks off): one more slot exchange hands the
    // addresses over as a few cache lines, where a round of messages would pass through the transport's rings.
    c.view.slots->exchange(c, nullptr, {}, &mine, sizeof(mine));
    for (int q : others) {
      std::memcpy(&peers.hello[static_cast<std::size_t>(q)], c.view.slots->data(c, q, sizeof(CmaHello)), sizeof(CmaHello));
    }
  } else if (gather_rides(sizeof(CmaHello), p)) {
    // On the call check's rounds (the check runs with them, or they carry only this when checks are off).
    std::vector<CmaHello> held(static_cast<std::size_t>(p), mine);
    ride_gather(c, reinterpret_cast<char*>(held.data()), sizeof(CmaHello));
    for (int i = 0; i < p; ++i) peers.hello[static_cast<std::size_t>((c.rank() - i + p) % p)] = held[static_cast<std::size_t>(i)];
  } else {
    if (c.call != nullptr) check_calls_match(c, c.call);
    std::vector<transport::RequestPtr> reqs;
    for (int q : others) reqs.push_back(c.irecv(q, step, &peers.hello[static_cast<std::size_t>(q)], sizeof(CmaHello)));
    for (int q : others) reqs.push_back(c.isend(q, step, &mine, sizeof(CmaHello)));
    c.wait_all(reqs);
  }
  for (int q = 0; q < p; ++q) peers.pid[static_cast<std::size_t>(q)] = pid_of(c, q);
  if (use == CmaUse::kYes) return true;
  // The first call: may this rank read every other's memory? The lowest rank that may not decides for all.
  int32_t refused = INT32_MAX;
  int err = 0;
  int blocked = -1;
  if (!env::get_bool("DCOMM_SHM_CMA", true)) {
    refused = c.rank();
  } else {
    for (int q : others) {
      const CmaHello& h = peers.hello[static_cast<std::size_t>(q)];
      err = transport::shm::cma_probe(peers.pid[static_cast<std::size_t>(q)], h.probe_addr, h.probe_value);
      if (err != 0) {
        refused = c.rank();
        blocked = q;
        break;
      }
    }
  }
  const int32_t first = agree(c, step + 1, refused, [](int32_t& m, int32_t t) { m = std::min(m, t); });
  use = first == INT32_MAX ? CmaUse::kYes : CmaUse::kNo;
  if (blocked >= 0) {
    DCOMM_INFO("{}: may not read rank {}'s memory (pid {}): {} (check /proc/sys/kernel/yama/ptrace_scope, or the "
               "container's seccomp profile)",
               c.what, blocked, peers.pid[static_cast<std::size_t>(blocked)], std::strerror(err));
  }
  if (use == CmaUse::kNo && c.rank() == 0) {
    DCOMM_INFO("{}: rank {} may not use cross-memory attach (DCOMM_SHM_CMA=0 or the kernel's ptrace rules): this "
               "group reduces through messages instead",
               c.what, first);
  }
  return use == CmaUse::kYes;
}

CmaStatus cma_copy(const Context& c, const CmaPeers& peers, int q, bool write, uint64_t addr, char* local,
                 std::size_t bytes) {
  const int pid = peers.pid[static_cast<std::size_t>(q)];
  int err = write ? transport::shm::cma_write(pid, addr, local, bytes) : transport::shm::cma_read(pid, local, addr, bytes);
  if (err == 0) return {};
  return CmaStatus{err, c.rank(), q, write ? 1 : 0, bytes};
}

// The root copies the head of every other rank's block, from r + 1 on in a scatter and r - 1 down in a gather (as
// the rows did before they shared the copy); each other rank the rest of its own, the other way.
CmaStatus cma_share_blocks(const Context& c, const CmaPeers& peers, int root, bool to_root, char* blocks, char* own,
                           std::size_t bytes) {
  const int p = c.size();
  const int r = c.rank();
  const std::size_t head = cma_root_share(bytes, p);
  CmaStatus status;
  if (r == root) {
    for (int s = 1; s < p && status.ok() && head > 0; ++s) {
      const int q = (to_root ? r - s + p : r + s) % p;
      const CmaHello& at = peers.hello[static_cast<std::size_t>(q)];
      status = cma_copy(c, peers, q, !to_root, to_root ? at.input : at.work, blocks + static_cast<std::size_t>(q) * bytes,
                        head);
    }
  } else if (bytes > head) {
    const CmaHello& at = peers.hello[static_cast<std::size_t>(root)];
    const uint64_t remote = (to_root ? at.work : at.input) + static_cast<uint64_t>(r) * bytes + head;
    status = cma_copy(c, peers, root, to_root, remote, own + head, bytes - head);
  }
  return status;
}

// Step 3: every rank's status to every other. Each rank hears every other out, even after a failure of its own,
// so that none exits while another may still copy its memory, and blames the root cause: a failed copy from a
// rank that reported a failure itself is a consequence (that rank left because of its own), so the failure to
// report is one whose owner reported none; else the wait's own error (a dead peer, named by the mesh's failure
// record); else this rank's.
CmaStatus cma_finish(const Context& c, const CmaStatus& mine, uint32_t step) {
  const std::vector<int> others = other_ranks(c);
  std::vector<CmaStatus> heard(others.size());
  std::vector<transport::RequestPtr> sends;
  std::exception_ptr lost;  // the first wait that failed
  if (c.view.slots != nullptr && c.call == nullptr) {
    // As the addresses came (cma_exchange): one more slot exchange, a cache line each way instead of a message
    // round. A rank that dies instead fails the wait, naming it (the mesh's failure record).
    c.view.slots->exchange(c, nullptr, {}, &mine, sizeof(mine));
    for (std::size_t i = 0; i < others.size(); ++i) {
      std::memcpy(&heard[i], c.view.slots->data(c, others[i], sizeof(CmaStatus)), sizeof(CmaStatus));
    }
  } else {
    for (int q : others) sends.push_back(c.isend(q, step, &mine, sizeof(mine)));
    std::vector<transport::RequestPtr> recvs;
    for (std::size_t i = 0; i < others.size(); ++i) recvs.push_back(c.irecv(others[i], step, &heard[i], sizeof(CmaStatus)));
    for (auto& r : recvs) {
      try {
        c.wait(r);
      } catch (const Error&) {
        if (!lost) lost = std::current_exception();
      }
    }
  }
  std::vector<CmaStatus> failures;
  if (!mine.ok()) failures.push_back(mine);
  for (const CmaStatus& s : heard) {
    if (!s.ok()) failures.push_back(s);
  }
  for (const CmaStatus& f : failures) {
    const bool owner_reported =
        std::any_of(failures.begin(), failures.end(), [&](const CmaStatus& g) { return g.rank == f.owner; });
    if (!owner_reported) return f;
  }
  if (lost) std::rethrow_exception(lost);
  try {
    c.wait_all(sends);
  } catch (const Error&) {
    if (mine.ok()) throw;
  }
  return failures.empty() ? CmaStatus{} : failures.front();
}

void cma_fail(const Context& c, const CmaPeers& peers, const CmaStatus& s) {
  const int pid = peers.pid[static_cast<std::size_t>(s.owner)];
  std::string why = s.err == ESRCH ? fmt::format("process {} (rank {}) exited", pid, s.owner)
                    : s.err == EFAULT
                        ? fmt::format("the buffer rank {} announced is not (or no longer) mapped in its process {}",
                                      s.owner, pid)
                        : std::string(std::strerror(s.err));
  std::string who = s.rank == c.rank() ? "this rank" : fmt::format("rank {}", s.rank);
  throw RemoteError(fmt::format(
      "{}: {} could not {} {} {} rank {}'s memory (pid {}) with {} (cross-memory attach, shm): {}, {} into the call "
      "(timeout {}). Check whether rank {} is still alive (its log); where ptrace rules forbid the copy, set "
      "DCOMM_SHM_CMA=0 on every rank",
      c.what, who, s.wrote ? "write" : "read", format_bytes(s.bytes), s.wrote ? "into" : "of", s.owner, pid,
      s.wrote ? "process_vm_writev" : "process_vm_readv", why, format_duration(c.deadline.elapsed()),
      format_duration(c.deadline.timeout()), s.owner));
}

}  // namespace dcomm::coll
