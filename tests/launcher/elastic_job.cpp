// One rank of an elastic job for dcomm-run's elastic tests: it joins the round's world, checks an all_reduce of
// values that differ on every rank and index against the serial sum, and prints one line:
//   ELASTIC round R restarts T rank K/W node N/M pid P ok|WRONG finishing|sleeping
// It finishes (exit 0) when the file DONE_FILE existed as it started; otherwise it sleeps until stopped, so that
// a test decides which round is the last one.
//   elastic_job DONE_FILE
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <dcomm/dcomm.hpp>

namespace {

constexpr int kSleepForeverS = 120;  // longer than any test: only dcomm-run ends a sleeping rank
constexpr int kCount = 1031;         // odd, and not divisible by any world size the tests use

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "?";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: elastic_job DONE_FILE\n");
    return 2;
  }
  const bool finishing = ::access(argv[1], F_OK) == 0;
  auto pg = dcomm::init();
  std::vector<int64_t> x(kCount);
  for (int i = 0; i < kCount; ++i) x[i] = 1000 * (pg->rank() + 1) + 7 * i;
  pg->all_reduce(dcomm::Buffer(x), dcomm::ReduceOp::kSum);
  int wrong = 0;
  for (int i = 0; i < kCount; ++i) {
    int64_t want = 0;
    for (int r = 0; r < pg->size(); ++r) want += 1000 * (r + 1) + 7 * i;
    wrong += x[i] != want;
  }
  std::printf("ELASTIC round %s restarts %s rank %d/%d node %s/%s pid %d %s %s\n", env("DCOMM_RESTART_COUNT"),
              env("TORCHELASTIC_RESTART_COUNT"), pg->rank(), pg->size(), env("GROUP_RANK"), env("GROUP_WORLD_SIZE"),
              static_cast<int>(::getpid()), wrong == 0 ? "ok" : "WRONG", finishing ? "finishing" : "sleeping");
  std::fflush(stdout);
  if (!finishing) std::this_thread::sleep_for(std::chrono::seconds(kSleepForeverS));
  pg->barrier();
  return wrong == 0 ? 0 : 1;
}
