// The process group on device buffers in real processes, started by dcomm-run; device traffic between the ranks
// of this node takes cuda_ipc (the mesh's device route). Run as `cuda_pg_mp DCOMM_RUN NPROC MODE`, it launches
// itself through dcomm-run and checks the result; the ranks run `cuda_pg_mp worker MODE`. Exits 77 without a GPU.
//   matrix  every collective x every algorithm that handles the call x dtypes x counts (1, 7, 1003, 65541),
//           device buffers, checked against the serial reference of tests/collectives (exact for integers).
//   killed  the last rank dies (SIGKILL) during a 64 MiB device all_reduce; every survivor must fail with a
//           RemoteError naming it, and print "SURVIVOR rank R: <error>".

#include <dcomm/dcomm.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "collectives/registry.hpp"
#include "tests/collectives/reference.hpp"
#include "tests/cuda/device_memory.hpp"
#include "tests/cuda/test_kernels.hpp"

extern char** environ;

using namespace dcomm;

namespace {

constexpr int kExitSurvivor = 3;
const DType kDTypes[] = {DType::kFloat32, DType::kInt32, DType::kBFloat16, DType::kFloat64, DType::kUInt8};
const std::size_t kCounts[] = {1, 7, 1003, 65541};

struct Rank {
  ProcessGroup& pg;
  int device;  ///< -1: host buffers (modes *-host, which check this harness itself on machines without a GPU)
  std::vector<std::string> failures;
};

// One call on device memory: uploads `input`, runs `call(send, recv)`, returns the recv buffer's bytes.
template <typename Call>
test::Bytes on_device(Rank& r, const test::Bytes& input, std::size_t recv_bytes, DType t, Call call) {
  const std::size_t esize = dtype_size(t);
  if (r.device < 0) {
    test::Bytes send = input, recv(recv_bytes);
    Buffer s(send.data(), send.size() / esize, t), d(recv.data(), recv_bytes / esize, t);
    call(s, d);
    return recv;
  }
  test::DeviceMemory send(input.size()), recv(recv_bytes);
  send.upload(input.data(), input.size());
  Buffer s(send.data(), input.size() / esize, t, Device::cuda(r.device));
  Buffer d(recv.data(), recv_bytes / esize, t, Device::cuda(r.device));
  call(s, d);
  return recv.download(recv_bytes);
}

void note(Rank& r, const std::string& what, const std::string& mismatch) {
  if (!mismatch.empty()) r.failures.push_back(what + ": " + mismatch);
}

void run_one(Rank& r, Collective c, const std::string& algo, DType t, ReduceOp op, std::size_t count, uint64_t salt) {
  const int me = r.pg.rank(), p = r.pg.size();
  const std::size_t esize = dtype_size(t);
  const bool blocks = c == Collective::kReduceScatter || c == Collective::kAllToAll;
  const std::size_t in_count = blocks ? count * static_cast<std::size_t>(p) : count;
  std::vector<test::Bytes> inputs;
  for (int q = 0; q < p; ++q) inputs.push_back(test::make_input(t, op, q, in_count, salt));
  CollectiveOptions opts;
  opts.algorithm = algo;
  const int root = p - 1;
  const std::string what = fmt::format("{}[{}] {} x {} {}", to_string(c), algo, count, to_string(t), to_string(op));
  try {
    switch (c) {
      case Collective::kAllReduce: {
        auto got = on_device(r, inputs[me], count * esize, t, [&](Buffer& s, Buffer& d) {
          r.pg.all_reduce(s, d, op, opts);
        });
        note(r, what, test::check_reduction(got.data(), count, t, op, inputs, 0));
        break;
      }
      case Collective::kReduce: {
        auto got = on_device(r, inputs[me], count * esize, t, [&](Buffer& s, Buffer& d) {
          r.pg.reduce(s, d, root, op, opts);
        });
        if (me == root) note(r, what, test::check_reduction(got.data(), count, t, op, inputs, 0));
        break;
      }
      case Collective::kReduceScatter: {
        auto got = on_device(r, inputs[me], count * esize, t, [&](Buffer& s, Buffer& d) {
          r.pg.reduce_scatter(s, d, op, opts);
        });
        note(r, what, test::check_reduction(got.data(), count, t, op, inputs, count * static_cast<std::size_t>(me)));
        break;
      }
      case Collective::kBroadcast: {
        // In place: the send buffer is the result; on_device's recv buffer is left empty.
        test::Bytes result;
        on_device(r, inputs[me], 0, t, [&](Buffer& s, Buffer&) {
          r.pg.broadcast(s, root, opts);
          result.resize(count * esize);
          if (r.device < 0) std::memcpy(result.data(), s.data, result.size());
          else cuda::check(cudaMemcpy(result.data(), s.data, result.size(), cudaMemcpyDeviceToHost), "download");
        });
        note(r, what, test::check_copy(result.data(), inputs[root], 0, count, t, what));
        break;
      }
      case Collective::kAllGather: {
        auto got = on_device(r, inputs[me], count * esize * static_cast<std::size_t>(p), t, [&](Buffer& s, Buffer& d) {
          r.pg.all_gather(s, d, opts);
        });
        for (int q = 0; q < p; ++q) {
          note(r, what, test::check_copy(got.data() + static_cast<std::size_t>(q) * count * esize, inputs[q], 0, count,
                                         t, what));
        }
        break;
      }
      case Collective::kAllToAll: {
        auto got = on_device(r, inputs[me], in_count * esize, t, [&](Buffer& s, Buffer& d) {
          r.pg.all_to_all(s, d, opts);
        });
        for (int q = 0; q < p; ++q) {
          note(r, what, test::check_copy(got.data() + static_cast<std::size_t>(q) * count * esize, inputs[q],
                                         count * static_cast<std::size_t>(me), count, t, what));
        }
        break;
      }
      default: break;
    }
  } catch (const std::exception& e) {
    r.failures.push_back(what + " threw: " + e.what());
  }
}

// Point-to-point on device buffers honours P2POptions::stream: each rank fills its send buffer with a kernel that
// first idles 200 ms on its own stream and sends with that stream, so a send that did not wait for the kernel would
// carry the old contents. Every rank sends to the next and receives from the previous.
void p2p_stream_order(Rank& r) {
  if (r.device < 0) return;  // host buffers have no stream to wait for
  const std::size_t n = 65541;
  const int me = r.pg.rank(), size = r.pg.size(), next = (me + 1) % size, prev = (me + size - 1) % size;
  test::DeviceMemory out(n * sizeof(int32_t)), in(n * sizeof(int32_t));
  cuda::check(cudaMemset(out.data(), 0, out.bytes()), "memset");
  cuda::check(cudaMemset(in.data(), 0xFF, in.bytes()), "memset");
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  cudaStream_t stream = nullptr;
  cuda::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  try {
    test::queue_delayed_fill(stream, reinterpret_cast<int32_t*>(out.data()), n, 1000 + me, 200'000'000);
    P2POptions opts;
    opts.stream = stream;
    opts.async_op = true;
    auto recv = r.pg.recv(Buffer(in.data(), n, DType::kInt32, Device::cuda(r.device)), prev, 77, opts);
    auto send = r.pg.send(Buffer(out.data(), n, DType::kInt32, Device::cuda(r.device)), next, 77, opts);
    send->wait();
    recv->wait();
    std::vector<int32_t> got(n);
    std::memcpy(got.data(), in.download(n * sizeof(int32_t)).data(), n * sizeof(int32_t));
    for (std::size_t i = 0; i < n; ++i) {
      if (got[i] != 1000 + prev) {
        r.failures.push_back(fmt::format("p2p stream order: element {} from rank {} is {}, want {} (the send did not "
                                         "wait for the kernel on its stream)",
                                         i, prev, got[i], 1000 + prev));
        break;
      }
    }
  } catch (const std::exception& e) {
    r.failures.push_back(std::string("p2p stream order threw: ") + e.what());
  }
  (void)cudaStreamDestroy(stream);
}

int matrix(Rank& r) {
  p2p_stream_order(r);
  const Collective kColls[] = {Collective::kAllReduce, Collective::kReduce, Collective::kReduceScatter,
                               Collective::kBroadcast, Collective::kAllGather, Collective::kAllToAll};
  uint64_t salt = 1;  // also counts the calls
  coll::GroupView view;
  view.rank = r.pg.rank();
  view.size = r.pg.size();
  for (Collective c : kColls) {
    for (const coll::Algorithm* a : coll::algorithms_for(c)) {
      coll::Args probe;
      probe.coll = c;
      if (!a->supports(probe, view)) continue;  // every rank decides alike: same table, same size
      for (DType t : kDTypes) {
        for (std::size_t count : kCounts) {
          run_one(r, c, a->name, t, ReduceOp::kSum, count, salt++);
          if (c == Collective::kAllReduce) run_one(r, c, a->name, t, ReduceOp::kMax, count, salt++);
        }
      }
    }
  }
  for (const auto& f : r.failures) std::fprintf(stderr, "FAIL %s\n", f.c_str());
  std::printf("rank %d: %zu failure(s) in %llu calls\n", r.pg.rank(), r.failures.size(),
              static_cast<unsigned long long>(salt - 1));
  return r.failures.empty() ? 0 : 1;
}

int killed(Rank& r) {
  const std::size_t count = (std::size_t{64} << 20) / sizeof(float);
  std::vector<float> host(r.device < 0 ? count : 0, 1.0f);
  std::unique_ptr<test::DeviceMemory> dev;
  Buffer b(host.data(), count, DType::kFloat32);
  if (r.device >= 0) {
    dev = std::make_unique<test::DeviceMemory>(count * sizeof(float));
    cuda::check(cudaMemset(dev->data(), 0, dev->bytes()), "memset");
    b = Buffer(dev->data(), count, DType::kFloat32, Device::cuda(r.device));
  }
  const int dead = r.pg.size() - 1;
  CollectiveOptions opts;
  opts.async_op = true;
  // A 64 MiB all_reduce takes ~0.1 ms on an H100 (a single call finished before a kill 20 ms in, seen on the first
  // GPU run): every rank calls it in a loop, and the last one dies 50 us into its fourth call. The survivors' loop
  // then cannot finish: each must fail in the call the dead rank never completed, or the next.
  constexpr int kCalls = 10000;
  try {
    for (int i = 0; i < kCalls; ++i) {
      auto work = r.pg.all_reduce(b, ReduceOp::kSum, opts);
      if (r.pg.rank() == dead && i == 3) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));  // let the transfer start, then die in it
        std::fflush(stdout);
        ::raise(SIGKILL);
      }
      work->wait();
    }
    std::printf("rank %d: %d all_reduce calls finished although rank %d was killed\n", r.pg.rank(), kCalls, dead);
    return 1;
  } catch (const Error& e) {
    std::printf("SURVIVOR rank %d: [%s] %s\n", r.pg.rank(), to_string(e.code()), e.what());
    std::fflush(stdout);
    return kExitSurvivor;
  }
}

int worker(const std::string& mode) {
  if (mode.rfind("killed", 0) == 0) {
    // A survivor must outlive dcomm-run's SIGTERM to the group after the rank dies, long enough to report. Blocked
    // before any thread starts, so every thread inherits the mask.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, nullptr);
  }
  try {
    auto pg = init();
    if (mode == "matrix-host" || mode == "killed-host") {
      Rank r{*pg, -1, {}};
      return mode == "killed-host" ? killed(r) : matrix(r);
    }
    Rank r{*pg, pg->identity().local_rank % cuda::device_count(), {}};
    cuda::check(cudaSetDevice(r.device), "cudaSetDevice");
    return mode == "killed" ? killed(r) : matrix(r);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker failed: %s\n", e.what());
    return 1;
  }
}

// Runs dcomm-run with this program as the ranks; returns its exit status and its output.
int launch(const std::string& self, const std::string& run, int nproc, const std::string& mode, std::string* out) {
  char path[] = "/tmp/dcomm-cuda-pg-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd, 1);
  posix_spawn_file_actions_adddup2(&fa, fd, 2);
  std::vector<std::string> args = {run, "--nproc-per-node", std::to_string(nproc), "--standalone",
                                   "--grace-period", "60", "--", self, "worker", mode};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, run.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fd);
  int status = -1;
  if (rc == 0) {
    Deadline deadline = Deadline::after(std::chrono::seconds(280));
    Backoff backoff(std::chrono::milliseconds(50));
    while (waitpid(pid, &status, WNOHANG) != pid) {
      if (deadline.expired()) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      backoff.pause();
    }
  }
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  unlink(path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "worker") return worker(argv[2]);
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s DCOMM_RUN NPROC matrix|killed\n", argv[0]);
    return 2;
  }
  if (cuda::device_count() == 0) {
    std::puts("no CUDA device: skipping");
    return 77;
  }
  const int nproc = std::atoi(argv[2]);
  const std::string mode = argv[3];
  std::string out;
  const int rc = launch(argv[0], argv[1], nproc, mode, &out);
  bool ok = true;
  if (mode == "matrix") {
    ok = rc == 0;
    for (int r = 0; r < nproc; ++r) ok = ok && out.find(fmt::format("rank {}: 0 failure(s)", r)) != std::string::npos;
  } else {
    ok = rc != 0;
    for (int r = 0; r + 1 < nproc; ++r) {
      const std::string tag = fmt::format("SURVIVOR rank {}: [RemoteError]", r);
      const auto at = out.find(tag);
      const std::string line = at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
      ok = ok && line.find(fmt::format("rank {}", nproc - 1)) != std::string::npos &&
           line.find("exited") != std::string::npos;
    }
  }
  if (!ok) std::printf("%s with %d ranks failed (dcomm-run exit %d); its output:\n%s\n", mode.c_str(), nproc, rc,
                       out.c_str());
  return ok ? 0 : 1;
}
