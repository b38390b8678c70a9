#include "collectives/cma_slices.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <dcomm/error.hpp>
#include <vector>

#include "collectives/call_check.hpp"
#include "collectives/dissemination.hpp"
#include "collectives/ride.hpp"
#include "common/deadline.hpp"
#include "common/env.hpp"
#include "common/log.hpp"
#include "transports/shm/shm_cma.hpp"

namespace dcomm::coll {

namespace {

struct Hello {
  uint64_t input;
  uint64_t work;
  uint64_t probe_addr;   // where this process holds probe_value (the first call checks that peers can read it)
  uint64_t probe_value;
};

/// The outcome of this rank's copies, or the first failure it heard of.
struct Status {
  int32_t err = 0;      // 0, or the errno of the failed copy
  int32_t rank = -1;    // the group rank whose copy failed
  int32_t owner = -1;   // the group rank whose memory it read or wrote
  int32_t wrote = 0;    // 1: a write into owner's memory, 0: a read
  uint64_t bytes = 0;   // the size of the failed copy
  bool ok() const { return err == 0; }
};

struct Peers {
  std::vector<Hello> hello;  // by group rank
  std::vector<int> pid;
};

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

// Step 1: the addresses; on the first call also the agreement (steps step + 1 ...).
bool exchange(const Context& c, CmaUse& use, Peers& peers, uint32_t step) {
  const int p = c.size();
  const Hello mine{reinterpret_cast<uint64_t>(c.input), reinterpret_cast<uint64_t>(c.work),
                   transport::shm::cma_probe_address(), transport::shm::cma_probe_value()};
  peers.hello.assign(static_cast<std::size_t>(p), mine);
  peers.pid.resize(static_cast<std::size_t>(p));
  const std::vector<int> others = other_ranks(c);
  if (gather_rides(sizeof(Hello), p)) {
    // On the call check's rounds (the check runs with them, or they carry only this when checks are off).
    std::vector<Hello> held(static_cast<std::size_t>(p), mine);
    ride_gather(c, reinterpret_cast<char*>(held.data()), sizeof(Hello));
    for (int i = 0; i < p; ++i) peers.hello[static_cast<std::size_t>((c.rank() - i + p) % p)] = held[static_cast<std::size_t>(i)];
  } else {
    if (c.call != nullptr) check_calls_match(c, c.call);
    std::vector<transport::RequestPtr> reqs;
    for (int q : others) reqs.push_back(c.irecv(q, step, &peers.hello[static_cast<std::size_t>(q)], sizeof(Hello)));
    for (int q : others) reqs.push_back(c.isend(q, step, &mine, sizeof(Hello)));
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
      const Hello& h = peers.hello[static_cast<std::size_t>(q)];
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

Status copy_with(const Context& c, const Peers& peers, int q, bool write, uint64_t addr, char* local,
                 std::size_t bytes) {
  const int pid = peers.pid[static_cast<std::size_t>(q)];
  int err = write ? transport::shm::cma_write(pid, addr, local, bytes) : transport::shm::cma_read(pid, local, addr, bytes);
  if (err == 0) return {};
  return Status{err, c.rank(), q, write ? 1 : 0, bytes};
}

// Step 2: this rank's slice [offset, offset + count), written to each rank of `to` (this one included or not).
Status reduce_slice(const Context& c, const Peers& peers, std::size_t offset, std::size_t count,
                    const std::vector<int>& to) {
  if (count == 0) return {};
  const int p = c.size();
  const int r = c.rank();
  const std::size_t es = c.esize();
  const std::size_t piece = std::min(count, std::max<std::size_t>(1, std::min(c.chunk_elems(), kCmaPieceBytes / es)));
  Scratch tmp = c.scratch(2 * piece);
  char* theirs = tmp.data();
  char* sum_buf = c.at(tmp.data(), piece);
  const bool keep = std::find(to.begin(), to.end(), r) != to.end();
  // The sum runs in the output itself unless this rank keeps no result, or the output is also its input (in
  // place, or the engine copied the input there) and rank 0's piece would overwrite its own before it is added.
  const bool in_output = keep && !(c.input == c.work && r != 0);
  for (std::size_t done = 0; done < count; done += piece) {
    const std::size_t len = std::min(piece, count - done);
    const std::size_t at = offset + done;
    char* out = c.at(c.work, at);
    char* acc = in_output ? out : sum_buf;
    for (int q = 0; q < p; ++q) {
      const char* src = c.at(c.input, at);
      if (q != r) {
        char* into = q == 0 ? acc : theirs;
        Status s = copy_with(c, peers, q, false, peers.hello[static_cast<std::size_t>(q)].input + at * es, into,
                             len * es);
        if (!s.ok()) return s;
        src = into;
      }
      if (q == 0) {
        if (src != acc) c.copy(acc, src, len);
      } else {
        c.reduce(acc, src, len);
      }
    }
    for (int q : to) {
      if (q == r) {
        if (acc != out) c.copy(out, acc, len);
        continue;
      }
      Status s = copy_with(c, peers, q, true, peers.hello[static_cast<std::size_t>(q)].work + at * es, acc, len * es);
      if (!s.ok()) return s;
    }
  }
  return {};
}

// Step 3: every rank's status to every other. Each rank hears every other out, even after a failure of its own,
// so that none exits while another may still copy its memory, and blames the root cause: a failed copy from a
// rank that reported a failure itself is a consequence (that rank left because of its own), so the failure to
// report is one whose owner reported none; else the wait's own error (a dead peer, named by the mesh's failure
// record); else this rank's.
Status finish(const Context& c, const Status& mine, uint32_t step) {
  const std::vector<int> others = other_ranks(c);
  std::vector<transport::RequestPtr> sends;
  for (int q : others) sends.push_back(c.isend(q, step, &mine, sizeof(mine)));
  std::vector<Status> heard(others.size());
  std::vector<transport::RequestPtr> recvs;
  for (std::size_t i = 0; i < others.size(); ++i) recvs.push_back(c.irecv(others[i], step, &heard[i], sizeof(Status)));
  std::exception_ptr lost;  // the first wait that failed
  for (auto& r : recvs) {
    try {
      c.wait(r);
    } catch (const Error&) {
      if (!lost) lost = std::current_exception();
    }
  }
  std::vector<Status> failures;
  if (!mine.ok()) failures.push_back(mine);
  for (const Status& s : heard) {
    if (!s.ok()) failures.push_back(s);
  }
  for (const Status& f : failures) {
    const bool owner_reported =
        std::any_of(failures.begin(), failures.end(), [&](const Status& g) { return g.rank == f.owner; });
    if (!owner_reported) return f;
  }
  if (lost) std::rethrow_exception(lost);
  try {
    c.wait_all(sends);
  } catch (const Error&) {
    if (mine.ok()) throw;
  }
  return failures.empty() ? Status{} : failures.front();
}

[[noreturn]] void fail(const Context& c, const Peers& peers, const Status& s) {
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

}  // namespace

bool cma_reduce(const Context& c, CmaUse& use, int root, uint32_t step) {
  if (use == CmaUse::kNo) {
    if (c.call != nullptr) check_calls_match(c, c.call);  // the fallback does not carry it
    return false;
  }
  Peers peers;
  if (!exchange(c, use, peers, step)) return false;
  const std::vector<pattern::Block> slices = pattern::even_blocks(c.work_count, c.size());
  const pattern::Block mine = slices[static_cast<std::size_t>(c.rank())];
  std::vector<int> to;
  if (root >= 0) {
    to.push_back(root);
  } else {
    for (int q = 0; q < c.size(); ++q) to.push_back(q);
  }
  Status s = finish(c, reduce_slice(c, peers, mine.offset, mine.count, to),
                    step + 2 + static_cast<uint32_t>(pattern::ceil_log2(c.size())));
  if (!s.ok()) fail(c, peers, s);
  return true;
}

}  // namespace dcomm::coll
