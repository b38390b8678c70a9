// The cuda_ipc transport across real processes (started with posix_spawn; no fork after threads), rendezvousing
// through a FileStore. Worlds of 2 and 4 ranks exchange an all-pairs matrix of device messages (0 B, 1 B, odd
// sizes, 1 MiB + 7) sent from odd offsets inside one allocation into misaligned receive buffers; then a peer that
// is killed while a device send to it is in flight must be reported dead, and close() must fail the send.
// The "pool" modes send from cudaMallocAsync memory, which legacy IPC cannot export, so it goes through the sender's
// staging buffer in chunks (0 B, 1 B, odd sizes, and one message larger than all staging slots together); the
// receiver takes those messages in reverse order of sending, so streaming must follow its receives, not the sends.
// Exits 77 without a CUDA device.

#include <dcomm/error.hpp>
#include <fmt/format.h>
#include <signal.h>
#include <sys/mman.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/cuda/device_memory.hpp"
#include "tests/cuda/file_store.hpp"
#include "transports/cuda_ipc/ipc_memory.hpp"
#include "transports/cuda_ipc/staged_send.hpp"
#include "transports/registry.hpp"

extern char** environ;

using namespace dcomm;
using namespace dcomm::transport;

namespace {

using test::Allocator;

constexpr std::size_t kSizes[] = {0, 1, 17, 4099, (std::size_t{1} << 20) + 7};
// Staged: within one chunk, a chunk and a byte, and more than every slot together (the slots are reused).
constexpr std::size_t kChunk = transport::cuda_ipc::StagingLayout::kChunkBytes;
constexpr std::size_t kPoolSizes[] = {0, 1, 17, 4099, kChunk + 1,
                                      2 * transport::cuda_ipc::StagingLayout::kBufferBytes + 13};
constexpr auto kTimeout = std::chrono::seconds(60);

unsigned char byte_at(int src, int dst, std::size_t k, std::size_t i) {
  return static_cast<unsigned char>((src * 7 + dst * 13 + i * 31 + k) % 251);
}

struct Collect final : ArrivalSink {
  std::vector<Incoming> pending;
  void arrived(Transport&, const Incoming& m) override { pending.push_back(m); }
};

struct World {
  int rank, size, device;
  std::unique_ptr<test::FileStore> store;
  std::unique_ptr<Transport> transport;
};

World join(int rank, int size, const std::string& dir) {
  World w{rank, size, rank % cuda::device_count(), std::make_unique<test::FileStore>(dir, kTimeout), nullptr};
  cuda::check(cudaSetDevice(w.device), "cudaSetDevice");
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  auto self_info = [&](int r, int pid) { return PeerInfo{r, r, 0, "cuda-ipc-test-host", host, pid}; };
  w.store->set("pid/" + std::to_string(rank), std::to_string(getpid()));
  TransportContext ctx{self_info(rank, getpid()), size, kTimeout, dir.substr(dir.rfind('/') + 1)};
  w.transport = make_cuda_ipc_transport(ctx);
  w.transport->publish(*w.store);
  std::vector<PeerInfo> peers;
  for (int r = 0; r < size; ++r) {
    if (r != rank) peers.push_back(self_info(r, std::stoi(w.store->get_string("pid/" + std::to_string(r)))));
  }
  for (const PeerInfo& p : peers) {
    if (!w.transport->can_connect(ctx.self, p)) throw Error(ErrorCode::kInternal, "can_connect refused a local peer");
  }
  w.transport->connect(*w.store, peers, Deadline::after(kTimeout));
  return w;
}

// Every rank sends every size to every other rank (tag = size index) and checks what it receives.
int run_matrix(World& w, Allocator from) {
  const bool pool = from == Allocator::kPool;
  const std::vector<std::size_t> sizes = pool ? std::vector<std::size_t>(std::begin(kPoolSizes), std::end(kPoolSizes))
                                              : std::vector<std::size_t>(std::begin(kSizes), std::end(kSizes));
  std::size_t total = 0;
  for (std::size_t s : sizes) total += s + 3;
  test::DeviceMemory send_mem(total * static_cast<std::size_t>(w.size), from);
  if (pool && transport::cuda_ipc::ipc_exportable(send_mem.data())) {
    std::fprintf(stderr, "rank %d: cudaMallocAsync memory reads as IPC-exportable; the staged path is not tested\n",
                 w.rank);
    return 1;
  }
  std::vector<OpPtr> sends;
  struct Expected {
    int src;
    std::size_t k;
    std::unique_ptr<test::DeviceMemory> mem;
    OpPtr op;
  };
  std::vector<Expected> recvs;
  std::size_t offset = 3;  // odd offsets: the handle's base and the payload's offset differ
  for (int dst = 0; dst < w.size; ++dst) {
    if (dst == w.rank) continue;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      std::vector<unsigned char> data(sizes[k]);
      for (std::size_t i = 0; i < data.size(); ++i) data[i] = byte_at(w.rank, dst, k, i);
      send_mem.upload(data.data(), data.size(), offset);
      sends.push_back(std::make_shared<Op>());
      w.transport->isend(dst, k, send_mem.data() + offset, data.size(), Device::cuda(w.device), sends.back());
      offset += sizes[k] + 3;
      recvs.push_back({dst, k, std::make_unique<test::DeviceMemory>(sizes[k] + 1, from), nullptr});
    }
  }
  Collect sink;
  Deadline deadline = Deadline::after(kTimeout);
  Backoff backoff;
  auto all_done = [](const auto& ops) {
    for (const auto& op : ops) {
      if (!op || !op->done()) return false;
    }
    return true;
  };
  std::vector<OpPtr> recv_ops(recvs.size());
  std::vector<Incoming> held;  // pool mode: every arrival, received only once all have come, last sent first
  while (!all_done(sends) || !all_done(recv_ops)) {
    if (deadline.expired()) {
      std::fprintf(stderr, "rank %d: matrix not done after %s\n", w.rank, format_duration(deadline.elapsed()).c_str());
      return 1;
    }
    bool any = w.transport->progress(sink);
    if (pool) {
      held.insert(held.end(), sink.pending.begin(), sink.pending.end());
      sink.pending.clear();
      if (held.size() == recvs.size()) {
        std::sort(held.begin(), held.end(), [](const Incoming& a, const Incoming& b) { return a.tag > b.tag; });
        sink.pending = std::move(held);
        held.clear();
      }
    }
    for (const Incoming& m : sink.pending) {
      for (std::size_t e = 0; e < recvs.size(); ++e) {
        if (recvs[e].src == m.source && recvs[e].k == m.tag && !recv_ops[e]) {
          recv_ops[e] = recvs[e].op = std::make_shared<Op>();
          // One byte in: the receive side's destination is misaligned too.
          w.transport->receive(m, recvs[e].mem->data() + 1, Device::cuda(w.device), recvs[e].op);
        }
      }
    }
    sink.pending.clear();
    if (any) backoff.reset(); else backoff.pause();
  }
  int failures = 0;
  for (const OpPtr& op : sends) failures += op->state() != Op::State::kDone;
  for (const Expected& e : recvs) {
    std::vector<unsigned char> got = e.mem->download(sizes[e.k], 1);
    bool ok = e.op->state() == Op::State::kDone && e.op->bytes() == sizes[e.k];
    for (std::size_t i = 0; ok && i < got.size(); ++i) ok = got[i] == byte_at(e.src, w.rank, e.k, i);
    if (!ok) std::fprintf(stderr, "rank %d: message %zu from rank %d is wrong\n", w.rank, e.k, e.src);
    failures += !ok;
  }
  // Leave together: a rank's memory must stay mapped until every peer has copied out of it (acks ensure that) and
  // its segment until every ack to it was read (ours were).
  w.store->set("done/" + std::to_string(w.rank), "1");
  std::vector<std::string> keys;
  for (int r = 0; r < w.size; ++r) keys.push_back("done/" + std::to_string(r));
  w.store->wait(keys, kTimeout);
  w.transport->close();
  return failures == 0 ? 0 : 1;
}

// Rank 1 dies; rank 0's send to it must not complete, liveness must name the dead process, close must fail it.
int run_kill(World& w, Allocator from) {
  if (w.rank == 1) raise(SIGKILL);
  test::DeviceMemory mem(1 << 20, from);
  auto op = std::make_shared<Op>();
  w.transport->isend(1, 5, mem.data(), mem.bytes(), Device::cuda(w.device), op);
  Collect sink;
  Deadline deadline = Deadline::after(kTimeout);
  Backoff backoff(std::chrono::milliseconds(10));
  std::string failure;
  while ((failure = w.transport->peer_failure(1)).empty() && !deadline.expired()) {
    w.transport->progress(sink);
    backoff.pause();
  }
  int bad = 0;
  bad += failure.find("exited") == std::string::npos;
  bad += op->done();
  w.transport->close();
  bad += op->state() != Op::State::kFailed;
  if (bad) std::fprintf(stderr, "rank 0: dead peer handling wrong (failure text '%s')\n", failure.c_str());
  return bad == 0 ? 0 : 1;
}

int child(const std::string& mode, int rank, int size, const std::string& dir) {
  try {
    World w = join(rank, size, dir);
    const Allocator from = mode.ends_with("-pool") ? Allocator::kPool : Allocator::kMalloc;
    return mode.starts_with("kill") ? run_kill(w, from) : run_matrix(w, from);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    return 1;
  }
}

// Starts `size` ranks of this program and checks their exits (`killed` ranks must die by SIGKILL).
int run_world(const char* self, int size, const std::string& mode, int killed = -1) {
  char tmpl[] = "/tmp/dcomm-cuda-ipc-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::vector<pid_t> pids;
  for (int r = 0; r < size; ++r) {
    std::vector<std::string> args = {self, "--child", mode, std::to_string(r), std::to_string(size), dir};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, self, nullptr, nullptr, argv.data(), environ) != 0) return 1;
    pids.push_back(pid);
  }
  int failures = 0;
  Deadline deadline = Deadline::after(kTimeout + std::chrono::seconds(30));
  Backoff backoff(std::chrono::milliseconds(20));
  for (std::size_t left = pids.size(); left > 0;) {
    for (std::size_t r = 0; r < pids.size(); ++r) {
      int status = 0;
      if (pids[r] == 0 || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      const bool want_kill = static_cast<int>(r) == killed;
      const bool ok = want_kill ? (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
                                : (WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (!ok) std::fprintf(stderr, "%s world of %d: rank %zu ended with status %d\n", mode.c_str(), size, r, status);
      failures += !ok;
      pids[r] = 0;
      --left;
    }
    if (deadline.expired()) {
      for (pid_t p : pids) {
        if (p != 0) kill(p, SIGKILL), waitpid(p, nullptr, 0), ++failures;
      }
      std::fprintf(stderr, "%s world of %d: ranks still running at the deadline\n", mode.c_str(), size);
      break;
    }
    backoff.pause();
  }
  // A killed rank never unlinks its control segment; the name follows cuda_ipc's "/dcomm-<world id>-cuda_ipc-<rank>"
  // with the world id the ranks used (the directory's name, which has no characters the transport replaces).
  const std::string world_id = dir.substr(dir.rfind('/') + 1);
  for (int r = 0; r < size; ++r) shm_unlink(fmt::format("/dcomm-{}-cuda_ipc-{}", world_id, r).c_str());
  std::filesystem::remove_all(dir);
  std::printf("%s, %d ranks: %s\n", mode.c_str(), size, failures ? "FAILED" : "ok");
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "--child") {
    return child(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), argv[5]);
  }
  if (cuda::device_count() == 0) {
    std::puts("no CUDA device: skipping");
    return 77;
  }
  int failures = run_world(argv[0], 2, "matrix") + run_world(argv[0], 4, "matrix") + run_world(argv[0], 2, "kill", 1);
  failures += run_world(argv[0], 2, "matrix-pool") + run_world(argv[0], 3, "matrix-pool");
  failures += run_world(argv[0], 2, "kill-pool", 1);
  return failures == 0 ? 0 : 1;
}
