// A program for dcomm-run's tests to launch: it prints its environment, exits with a code or a signal on one
// rank, sleeps until stopped, fails in the first round only, writes awkward output, or leaves a grandchild.
//   launcher_probe env
//   launcher_probe fail RANK CODE DELAY_MS        (the other ranks sleep until stopped)
//   launcher_probe signal RANK SIGNAL DELAY_MS    (the other ranks sleep until stopped)
//   launcher_probe sleep                          (reports SIGTERM on stdout, then exits 0)
//   launcher_probe env-sleep                      (env, then the store's secret, then sleep)
//   launcher_probe sleep-ignore                   (ignores SIGTERM and SIGINT: only SIGKILL ends it)
//   launcher_probe fail-first-round RANK CODE
//   launcher_probe output
//   launcher_probe grandchild RANK CODE DELAY_MS  (every rank starts a sleeping grandchild first)

#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

extern char** environ;

namespace {

// Long enough that only dcomm-run stopping them ends the sleeping ranks within any test's timeout.
constexpr int kSleepForeverS = 120;

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? -1 : std::atoi(v);
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

void say(const std::string& s) {
  std::string line = s + "\n";
  ssize_t ignored = ::write(STDOUT_FILENO, line.data(), line.size());
  (void)ignored;
}

int print_env() {
  static const char* kNames[] = {
      "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "MASTER_ADDR",
      "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "DCOMM_RANK", "DCOMM_WORLD_SIZE", "DCOMM_LOCAL_RANK",
      "DCOMM_LOCAL_WORLD_SIZE", "DCOMM_NODE_RANK", "DCOMM_NODE_COUNT", "DCOMM_MASTER_ADDR", "DCOMM_MASTER_PORT",
      "DCOMM_STORE_HOSTED", "DCOMM_RUN_ID", "DCOMM_RESTART_COUNT", "DCOMM_HOST_ID", "TORCHELASTIC_RUN_ID",
      "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "TORCHELASTIC_MAX_RESTARTS",
      "TORCHELASTIC_USE_AGENT_STORE"};
  std::string out;
  for (const char* n : kNames) {
    const char* v = std::getenv(n);
    out += std::string("ENV ") + n + "=" + (v != nullptr ? v : "<unset>") + "\n";
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}

void on_term(int) {
  char line[64];
  int n = std::snprintf(line, sizeof(line), "rank %d got SIGTERM\n", env_int("RANK"));
  ssize_t ignored = ::write(STDOUT_FILENO, line, static_cast<std::size_t>(n));
  (void)ignored;
  _exit(0);
}

// With PROBE_READY_DIR set, a sleeping rank marks itself ready there (once it handles SIGTERM), and a failing
// rank waits for every other rank's mark, so a test can tell that dcomm-run stopped them.
std::string ready_mark(int rank) {
  const char* dir = std::getenv("PROBE_READY_DIR");
  return dir == nullptr ? std::string() : std::string(dir) + "/ready." + std::to_string(rank);
}

void wait_for_others_ready() {
  constexpr int kMaxWaitMs = 60000;
  constexpr int kStepMs = 10;
  if (ready_mark(0).empty()) return;
  for (int waited = 0; waited < kMaxWaitMs; waited += kStepMs) {
    int ready = 0;
    for (int r = 0; r < env_int("WORLD_SIZE"); ++r) {
      ready += r != env_int("RANK") && ::access(ready_mark(r).c_str(), F_OK) == 0;
    }
    if (ready == env_int("WORLD_SIZE") - 1) return;
    sleep_ms(kStepMs);
  }
}

int sleep_until_stopped(bool ignore_term) {
  if (ignore_term) {
    ::signal(SIGTERM, SIG_IGN);
    ::signal(SIGINT, SIG_IGN);
  } else {
    ::signal(SIGTERM, on_term);
  }
  say("ready");
  if (std::string mark = ready_mark(env_int("RANK")); !mark.empty()) {
    if (FILE* f = std::fopen(mark.c_str(), "w")) std::fclose(f);
  }
  sleep_ms(kSleepForeverS * 1000);
  return 0;
}

int output() {
  std::fputs("al", stdout);
  std::fflush(stdout);
  sleep_ms(50);
  std::fputs("pha\nbeta\n", stdout);
  std::fflush(stdout);
  std::fputs("to stderr\n", stderr);
  std::fputs("no newline", stdout);
  std::fflush(stdout);
  return 0;
}

void start_grandchild(const char* self) {
  const char* argv[] = {self, "sleep-ignore", nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, self, nullptr, nullptr, const_cast<char**>(argv), environ) != 0) std::exit(9);
  say("grandchild " + std::to_string(pid));
}

int fail_or_sleep(int argc, char** argv, bool by_signal) {
  if (argc < 5) return 64;
  if (env_int("RANK") != std::atoi(argv[2])) return sleep_until_stopped(false);
  wait_for_others_ready();
  sleep_ms(std::atoi(argv[4]));
  std::fprintf(stderr, "rank %d about to fail\n", env_int("RANK"));
  std::fflush(stderr);
  if (by_signal) {
    ::raise(std::atoi(argv[3]));
    return 0;
  }
  return std::atoi(argv[3]);
}

// A progress bar as dcomm-bench draws one (redrawn with '\r', erased before each table line), on rank 0 only
// and only when DCOMM_RUN_TTY=1 says a terminal will see it.
int progress_bar() {
  const bool bar = env_int("RANK") == 0 && env_int("DCOMM_RUN_TTY") == 1;
  for (int i = 1; i <= 3; ++i) {
    if (bar) {
      std::fputs("\r\033[K", stderr);
      std::fflush(stderr);
    }
    std::printf("row %d\n", i);
    std::fflush(stdout);
    if (bar) {
      std::fprintf(stderr, "\r\033[K[%.*s%.*s] %d/3", i, "###", 3 - i, "...", i);
      std::fflush(stderr);
    }
    sleep_ms(300);
  }
  if (bar) std::fputs("\r\033[K", stderr);
  return 0;
}

// Rank argv[2] writes its own last words, then a crash handler's backtrace as UCX prints it on SIGSEGV (more
// frames than the summary keeps lines), then dies of SIGSEGV.
int crash_with_backtrace(int argc, char** argv) {
  if (argc < 3) return 64;
  if (env_int("RANK") != std::atoi(argv[2])) return sleep_until_stopped(false);
  wait_for_others_ready();
  std::fprintf(stderr, "rank %d: step 7, touching the halo buffer\n", env_int("RANK"));
  std::fputs("[vm:4242:0:4242] Caught signal 11 (Segmentation fault: address not mapped to object at address (nil))\n"
             "==== backtrace (tid:   4242) ====\n",
             stderr);
  for (int i = 0; i < 24; ++i) {
    std::fprintf(stderr, " %d  /lib/x86_64-linux-gnu/libucs.so.0(ucs_handle_error+0x2e4) [0x7f2b1c2d4f14]\n", i);
  }
  std::fputs("=================================\n", stderr);
  std::fflush(stderr);
  ::raise(SIGSEGV);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "env") return print_env();
  if (mode == "fail") return fail_or_sleep(argc, argv, false);
  if (mode == "signal") return fail_or_sleep(argc, argv, true);
  if (mode == "sleep") return sleep_until_stopped(false);
  if (mode == "env-sleep") {
    print_env();
    const char* secret = std::getenv("DCOMM_STORE_SECRET");
    std::printf("ENV DCOMM_STORE_SECRET=%s\n", secret != nullptr ? secret : "<unset>");
    std::fflush(stdout);
    return sleep_until_stopped(false);
  }
  if (mode == "sleep-ignore") return sleep_until_stopped(true);
  if (mode == "output") return output();
  if (mode == "bar") return progress_bar();
  if (mode == "crash-with-backtrace") return crash_with_backtrace(argc, argv);
  if (mode == "fail-first-round" && argc >= 4) {
    int round = env_int("DCOMM_RESTART_COUNT");
    if (round == 0 && env_int("RANK") == std::atoi(argv[2])) return std::atoi(argv[3]);
    say("round " + std::to_string(round) + " done");
    return 0;
  }
  if (mode == "grandchild") {
    start_grandchild(argv[0]);
    return fail_or_sleep(argc, argv, false);
  }
  std::fprintf(stderr, "launcher_probe: unknown mode '%s'\n", mode.c_str());
  return 64;
}
