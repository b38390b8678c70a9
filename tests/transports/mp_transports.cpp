// The transport suite in real processes, started by dcomm-run (see mp_tests.py). One mode per run:
//   conformance  every rank runs the conformance cases, 256 MiB and the poison case; exit 0 when all pass.
//   peer_killed  the last rank posts traffic and kills itself with SIGKILL; every survivor must fail well before
//                the op timeout with an error naming the dead rank and its host. Survivors print
//                "SURVIVOR rank R after S s: <error>" and exit 3; anything else exits 1.
//   staging      every rank runs the staging cases (device buffers staged over the host transport), with the fake
//                stager standing in for CUDA; exit 0 when all pass.
//   staged_peer_killed  the same with rank 0's message staged from (fake) device memory.
//   stream_peer_killed  the last rank receives a 64 MiB message from rank 0 through the ring (DCOMM_SHM_PROTOCOL=
//                stream, DCOMM_SHM_CMA=0) and kills itself once some of it has arrived: rank 0 is mid-stream.
//   stream_sender_killed  the other way: the last rank streams 128 MiB to rank 0 (CMA allowed, so rank 0 may be
//                pulling the rest) and is killed part way; with DCOMM_SHM_PROTOCOL=cma the same is a split read
//                (rank 0 reading, the last rank writing its part).
//   bench        rank 0 and 1: 8-byte ping-pong latency and 16 MiB bandwidth (a measurement, not a test).
// The transport is whatever DCOMM_TRANSPORT says (the tests force shm). MP_DENY_CMA_RANK=r makes rank r refuse
// cross-memory attach (DCOMM_SHM_CMA=0 in its environment only): the others may still read its memory.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <dcomm/error.hpp>

#include "rendezvous/bootstrap.hpp"
#include "tests/transports/conformance.hpp"
#include "tests/transports/fake_stager.hpp"
#include "tests/transports/staging_cases.hpp"
#include "transports/peer_table.hpp"

namespace {

using dcomm::transport::Mesh;

constexpr int kExitPass = 0;
constexpr int kExitFail = 1;
constexpr int kExitSurvivorSawDeath = 3;

constexpr std::size_t kStagingChunk = 1000;

std::shared_ptr<Mesh> join(dcomm::rdzv::Bootstrap& boot, std::shared_ptr<dcomm::transport::staging::Stager> stager) {
  const dcomm::Identity& id = boot.identity;
  auto self = dcomm::transport::local_peer_info(id.rank, id.local_rank, id.node_rank, id.host_id);
  dcomm::transport::MeshOptions opts;
  opts.timeout = std::chrono::seconds(120);
  opts.stager = std::move(stager);
  return Mesh::create(dcomm::make_prefix_store("mesh/", boot.store), self, id.world_size, opts);
}

int conformance(Mesh& m) {
  dcomm::test::RankLog log;
  dcomm::test::run_conformance(m, log);
  dcomm::test::case_big_message(m, log);
  dcomm::test::barrier(m, 999998, log);
  dcomm::test::case_poison_after_timeout(m, log);
  for (const auto& f : log.failures) std::fprintf(stderr, "FAIL %s\n", f.c_str());
  std::printf("rank %d over %s: %zu failure(s)\n", m.rank(), m.size() > 1 ? m.transport_name((m.rank() + 1) % m.size()) : "self",
              log.failures.size());
  return log.failures.empty() ? kExitPass : kExitFail;
}

int staging(Mesh& m, const dcomm::test::FakeStager& stager) {
  dcomm::test::RankLog log;
  dcomm::test::FakeDeviceAccess dev;
  dcomm::test::run_staging_cases(m, log, dev, kStagingChunk);
  log.expect(stager.copies() > 0, "no copy went through the stager");
  for (const auto& f : log.failures) std::fprintf(stderr, "FAIL %s\n", f.c_str());
  std::printf("rank %d over %s: %zu failure(s)\n", m.rank(), m.transport_name((m.rank() + 1) % m.size()),
              log.failures.size());
  return log.failures.empty() ? kExitPass : kExitFail;
}

enum class Dies { kIdle, kReceivingStream, kSendingStream };

int peer_killed(Mesh& m, bool staged, Dies how = Dies::kIdle) {
  const bool midstream = how == Dies::kReceivingStream;
  const int dead = m.size() - 1;
  // staged: rank 0's message is a "device" buffer (the fake stager's), so it is mid-staging when the peer dies.
  const dcomm::Device dev = staged ? dcomm::Device::cuda(0) : dcomm::Device::host();
  // The streaming sender's message is larger: the receiver may pull it at 20+ GB/s, and must not have it all
  // before the sender dies (see below).
  const std::size_t kBytes = how == Dies::kSendingStream ? std::size_t{128} << 20 : std::size_t{64} << 20;
  std::vector<uint8_t> buf(kBytes, static_cast<uint8_t>(m.rank() + 1));
  if (m.rank() == dead && midstream) {
    // Receive until part of rank 0's message is in, then die: rank 0 is left feeding a ring nobody drains.
    auto r = m.irecv(0, 1, buf.data(), kBytes, dev);
    bool done = false;
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
         std::chrono::steady_clock::now() < until && buf[0] != 1 && !done;) {
      done = m.test(*r);
    }
    std::printf("rank %d dies %s\n", m.rank(),
                done ? "after the whole message came" : buf[0] == 1 ? "mid-stream" : "before the first chunk came");
    std::fflush(stdout);
    ::raise(SIGKILL);
  }
  if (m.rank() == dead && how == Dies::kSendingStream) {
    // Send a message to rank 0 for a moment, then die with it half sent: rank 0 is mid-stream or mid-pull, or
    // mid-read of a split read (DCOMM_SHM_PROTOCOL=cma) while this rank writes its part. A timer kills the process
    // wherever it is (inside a write of its part, typically). The moment is short against the message (1 ms; 128
    // MiB take 5 ms or more even by one cross-memory read at 25 GB/s): with 5 ms and 64 MiB, rank 0 once pulled the
    // whole message first and its receive rightly completed.
    std::atomic<bool> sent{false};
    std::thread([&sent, rank = m.rank()] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::printf("rank %d dies sending%s\n", rank, sent ? " (too late: its message was already delivered)" : "");
      std::fflush(stdout);
      ::raise(SIGKILL);
    }).detach();
    auto s = m.isend(0, 1, buf.data(), kBytes, dev);
    while (!sent) sent = m.test(*s);
    std::this_thread::sleep_for(std::chrono::seconds(10));  // the timer's kill comes first
    return kExitFail;
  }
  if (m.rank() == dead) {
    // Post a receive for rank 0's large message and a small send, then die without progressing either: rank
    // 0's send is announced but never pulled or acknowledged.
    auto r = m.irecv(0, 1, buf.data(), kBytes, dev);
    auto s = m.isend(0, 5, buf.data(), 8);
    std::fflush(stdout);
    ::raise(SIGKILL);
  }
  // Rank 0 is mid-send to the dead rank; rank 1 (in worlds of 3) waits for anyone's message.
  dcomm::transport::RequestPtr req = m.rank() == 0 && how == Dies::kSendingStream
                                         ? m.irecv(dead, 1, buf.data(), kBytes, dev)
                                     : m.rank() == 0 ? m.isend(dead, 1, buf.data(), kBytes, dev)
                                                   : m.irecv(dcomm::kAnySource, 2, buf.data(), kBytes);
  auto start = std::chrono::steady_clock::now();
  try {
    m.wait(*req, dcomm::Deadline::after(std::chrono::seconds(120)), fmt::format("peer_killed rank {}", m.rank()));
    std::printf("rank %d: the request completed although rank %d was killed\n", m.rank(), dead);
    return kExitFail;
  } catch (const dcomm::Error& e) {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("SURVIVOR rank %d after %.1f s: [%s] %s\n", m.rank(), s, dcomm::to_string(e.code()), e.what());
    std::fflush(stdout);
    return kExitSurvivorSawDeath;
  }
}

int bench(Mesh& m) {
  if (m.rank() > 1) return kExitPass;
  const int peer = 1 - m.rank();
  auto deadline = [] { return dcomm::Deadline::after(std::chrono::seconds(60)); };
  // Ping-pong: rank 0 sends and waits for the echo. Stream: rank 0 sends, rank 1 receives, one at a time.
  auto exchange = [&](std::vector<uint8_t>& out, std::vector<uint8_t>& in, int iters, bool ping_pong) {
    for (int i = 0; i < iters; ++i) {
      bool sends_first = m.rank() == 0;
      if (sends_first) {
        auto s = m.isend(peer, 1, out.data(), out.size());
        m.wait(*s, deadline(), "bench send");
      }
      if (ping_pong || !sends_first) {
        auto r = m.irecv(peer, 1, in.data(), in.size());
        m.wait(*r, deadline(), "bench recv");
      }
      if (ping_pong && !sends_first) {
        auto s = m.isend(peer, 1, out.data(), out.size());
        m.wait(*s, deadline(), "bench send");
      }
    }
  };
  std::vector<uint8_t> small_out(8, 1), small_in(8);
  exchange(small_out, small_in, 1000, true);  // warm up
  constexpr int kPings = 20000;
  auto t0 = std::chrono::steady_clock::now();
  exchange(small_out, small_in, kPings, true);
  double lat_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kPings / 2;
  std::vector<uint8_t> big_out(16u << 20, 2), big_in(16u << 20);
  exchange(big_out, big_in, 3, false);
  constexpr int kBig = 40;
  dcomm::test::RankLog log;
  dcomm::test::barrier(m, 7, log);
  t0 = std::chrono::steady_clock::now();
  exchange(big_out, big_in, kBig, false);
  dcomm::test::barrier(m, 8, log);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (m.rank() == 0) {
    std::printf("BENCH over %s: 8 B latency %.2f us (half round trip, %d pings); 16 MiB bandwidth %.2f GB/s "
                "(%d messages)\n",
                m.transport_name(peer), lat_us, kPings, kBig * double(16u << 20) / secs / 1e9, kBig);
  }
  return log.failures.empty() ? kExitPass : kExitFail;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "conformance";
  // A survivor must outlive dcomm-run's SIGTERM to the group after a rank dies, long enough to report.
  const bool kill_case = mode == "peer_killed" || mode == "staged_peer_killed" || mode == "stream_peer_killed" ||
                         mode == "stream_sender_killed";
  if (kill_case) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, nullptr);
  }
  const char* deny = std::getenv("MP_DENY_CMA_RANK");
  const char* rank = std::getenv("RANK");
  if (deny != nullptr && rank != nullptr && std::string(deny) == rank) setenv("DCOMM_SHM_CMA", "0", 1);
  try {
    auto boot = dcomm::rdzv::bootstrap(dcomm::InitOptions{});
    // The kill case stages in 1 MiB chunks, as real stagers do (4 MiB): chunks above the transport's eager limit
    // complete only when the receiver has taken them, so a dead receiver leaves the send pending. With the
    // 1000-byte chunks of the staging cases every chunk would be buffered eagerly, like any small message.
    auto stager = std::make_shared<dcomm::test::FakeStager>(mode == "staged_peer_killed" ? 1u << 20 : kStagingChunk, 3);
    auto mesh = join(boot, stager);
    int rc = mode == "conformance" ? conformance(*mesh) : mode == "peer_killed" ? peer_killed(*mesh, false)
             : mode == "staged_peer_killed" ? peer_killed(*mesh, true)
             : mode == "stream_peer_killed" ? peer_killed(*mesh, false, Dies::kReceivingStream)
             : mode == "stream_sender_killed" ? peer_killed(*mesh, false, Dies::kSendingStream)
             : mode == "bench"     ? bench(*mesh)
             : mode == "staging"   ? staging(*mesh, *stager)
                                   : (std::fprintf(stderr, "unknown mode %s\n", mode.c_str()), kExitFail);
    // Every rank finishes its cases before any closes: an early exit looks like a failed peer to the others.
    if (!kill_case) {
      boot.store->set(fmt::format("done/{}", mesh->rank()), std::string("1"));
      std::vector<std::string> keys;
      for (int r = 0; r < mesh->size(); ++r) keys.push_back(fmt::format("done/{}", r));
      boot.store->wait(keys, std::chrono::seconds(120));
    }
    mesh->close();
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mp_transports %s failed: %s\n", mode.c_str(), e.what());
    return kExitFail;
  }
}
