// A rank is killed (SIGKILL) or stopped (SIGSTOP) at a chosen moment: a timer started at main() entry covers
// startup, rendezvous, mesh setup and the probe; a later one lands mid-collective or between calls (the loop
// sleeps now and then). Every survivor must fail naming the victim; kill_matrix.py checks what they print.
//   env: KILL_RANK (the victim), KILL_AFTER_S (seconds after main() entry, or with KILL_FROM=loop after init()
//        returned), KILL_SIGNAL (KILL, STOP, or SLEEP:
//        the victim's main thread sleeps LOOP_S seconds between two calls: alive, but in user code),
//        LOOP_S (how long the survivors' loop may run; they stop early only by failing), KILL_MOVE=1 (the loop
//        cycles through all_gather, all_to_all, broadcast, gather and scatter, moving blocks, instead of all_reduce)
//   prints: "PID rank R pid P run ID", "VICTIM rank R signal S at T", "SURVIVOR rank R at T call_s C: [Code] message"
//   (T: seconds since the epoch; C: how long the failing call had run), "DONE rank R" when the loop ran out.

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <dcomm/dcomm.hpp>

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double env_double(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atof(v) : fallback;
}

}  // namespace

int main() {
  const int rank = static_cast<int>(env_double("DCOMM_RANK", -1));
  const int victim = static_cast<int>(env_double("KILL_RANK", 1));
  const double after = env_double("KILL_AFTER_S", 1.0);
  const std::string how = std::getenv("KILL_SIGNAL") != nullptr ? std::getenv("KILL_SIGNAL") : "KILL";
  const bool stop = how == "STOP";
  const char* from = std::getenv("KILL_FROM");
  const bool from_loop = from != nullptr && std::string(from) == "loop";
  const double main_start = now_s();
  const char* run_id = std::getenv("DCOMM_RUN_ID");
  std::printf("PID rank %d pid %d run %s\n", rank, static_cast<int>(::getpid()), run_id != nullptr ? run_id : "-");
  std::fflush(stdout);
  if (rank == victim && how == "KILL" && run_id != nullptr) {
    // What a rank killed while it sets up shared memory leaves: a segment of the run's name. dcomm-run must remove
    // it (the transport's own segments are unlinked once mapped; this one stands for the window before).
    int fd = ::shm_open(("/dcomm-" + std::string(run_id) + "-leftover-" + std::to_string(rank)).c_str(),
                        O_CREAT | O_RDWR, 0600);
    if (fd >= 0) ::close(fd);
  }
  auto arm_victim = [&] {
    if (rank != victim || how == "SLEEP") return;
    std::thread([after, rank, stop] {
      std::this_thread::sleep_for(std::chrono::duration<double>(after));
      std::printf("VICTIM rank %d signal %s at %.3f\n", rank, stop ? "STOP" : "KILL", now_s());
      std::fflush(stdout);
      std::raise(stop ? SIGSTOP : SIGKILL);
    }).detach();
  };
  if (!from_loop) arm_victim();
  const double loop_s = env_double("LOOP_S", 20.0);
  double call_start = now_s();
  try {
    auto pg = dcomm::init();
    if (from_loop) arm_victim();  // however long startup took, the signal lands in the loop
    const bool move = env_double("KILL_MOVE", 0) != 0;
    const std::size_t p = static_cast<std::size_t>(pg->size());
    std::vector<float> small(257 * p), large(300001 * p), out(300001 * p * p);
    const double t0 = now_s();
    for (long i = 0; now_s() - t0 < loop_s; ++i) {
      std::vector<float>& x = i % 3 == 2 ? large : small;
      for (std::size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>((pg->rank() + 1) * 3 + (k % 11));
      call_start = now_s();
      float got = 0, want = 0;
      if (!move) {
        pg->all_reduce(dcomm::Buffer(x), dcomm::ReduceOp::kSum);
        got = x[5];
        want = static_cast<float>(pg->size() * (pg->size() + 1) / 2 * 3 + pg->size() * 5);
      } else if (i % 5 == 0) {  // all_gather: element 5 of the last rank's block
        pg->all_gather(dcomm::Buffer(x), dcomm::Buffer(out.data(), x.size() * p));
        got = out[(p - 1) * x.size() + 5];
        want = static_cast<float>(static_cast<int>(p) * 3 + 5);
      } else if (i % 5 == 2) {  // broadcast from the last rank: its element 5
        const int root = static_cast<int>(p) - 1;
        pg->broadcast(dcomm::Buffer(x), root);
        got = x[5];
        want = static_cast<float>((root + 1) * 3 + 5);
      } else if (i % 5 == 3) {  // gather to the last rank: element 5 of rank 0's block there
        const int root = static_cast<int>(p) - 1;
        pg->gather(dcomm::Buffer(x), dcomm::Buffer(out.data(), pg->rank() == root ? x.size() * p : 0), root);
        got = pg->rank() == root ? out[5] : static_cast<float>(3 + 5);
        want = static_cast<float>(3 + 5);
      } else if (i % 5 == 4) {  // scatter from rank 0: element 5 of this rank's block of rank 0's buffer
        const std::size_t b = x.size() / p;
        pg->scatter(dcomm::Buffer(x), dcomm::Buffer(out.data(), b), 0);
        got = out[5];
        want = static_cast<float>(3 + static_cast<int>((static_cast<std::size_t>(pg->rank()) * b + 5) % 11));
      } else {  // all_to_all: element 5 of the block from the last rank, its block for this rank
        pg->all_to_all(dcomm::Buffer(x), dcomm::Buffer(out.data(), x.size()));
        const std::size_t b = x.size() / p;
        got = out[(p - 1) * b + 5];
        want = static_cast<float>(static_cast<int>(p) * 3 + static_cast<int>((static_cast<std::size_t>(pg->rank()) * b + 5) % 11));
      }
      if (got != want) {
        std::printf("WRONG rank %d call %ld: %g, not %g\n", pg->rank(), i, got, want);
        return 4;
      }
      if (i % 40 == 39) std::this_thread::sleep_for(std::chrono::milliseconds(30));  // between calls
      if (how == "SLEEP" && rank == victim && now_s() - main_start >= after) {
        std::printf("VICTIM rank %d signal SLEEP at %.3f\n", rank, now_s());
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::duration<double>(loop_s));
        return 0;
      }
    }
  } catch (const dcomm::Error& e) {
    std::printf("SURVIVOR rank %d at %.3f call_s %.3f: [%s] %s\n", rank, now_s(), now_s() - call_start,
                dcomm::to_string(e.code()), e.what());
    std::fflush(stdout);
    return 3;
  }
  std::printf("DONE rank %d\n", rank);
  return 0;
}
