#include <catch2/catch.hpp>

#include <dcomm/dcomm.hpp>

#include "common/deadline.hpp"
#include "common/env.hpp"
#include "common/log.hpp"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

using namespace dcomm;

TEST_CASE("dtype sizes, names and parsing round-trip", "[common]") {
  for (DType t : kAllDTypes) {
    DType back{};
    REQUIRE(parse_dtype(to_string(t), &back));
    CHECK(back == t);
    CHECK(dtype_size(t) >= 1);
  }
  // Every dtype's size, from its name (the table in types.hpp follows the enum's order).
  for (DType t : kAllDTypes) {
    const std::string name = to_string(t);
    const std::size_t bits = name.find("64") != std::string::npos   ? 64
                             : name.find("32") != std::string::npos ? 32
                             : name.find("16") != std::string::npos ? 16
                                                                    : 8;
    CHECK(dtype_size(t) * 8 == bits);
  }
  DType t{};
  CHECK_FALSE(parse_dtype("float128", &t));
}

TEST_CASE("bitwise ops fit integers only", "[common]") {
  CHECK(op_fits_dtype(ReduceOp::kBXor, DType::kInt32));
  CHECK_FALSE(op_fits_dtype(ReduceOp::kBAnd, DType::kFloat32));
  CHECK(op_fits_dtype(ReduceOp::kMax, DType::kBFloat16));
}

TEST_CASE("deadlines expire and report their timeout", "[common]") {
  Deadline d = Deadline::after(std::chrono::milliseconds(20));
  CHECK_FALSE(d.expired());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(d.expired());
  CHECK(d.elapsed() >= std::chrono::milliseconds(20));
  CHECK_FALSE(Deadline::never().expired());
  CHECK(format_duration(std::chrono::milliseconds(1500)) == "1.5 s");
  CHECK(format_bytes(4u << 20) == "4.0 MiB");
}

TEST_CASE("a collective's deadline starts at its first wait, and bounds every wait from there", "[common]") {
  using std::chrono::milliseconds;
  Deadline d = Deadline::from_first_wait(milliseconds(20));
  std::this_thread::sleep_for(milliseconds(30));  // the call's own work before any wait: not counted
  d.arm();                                         // the first wait
  const Clock::time_point armed = Clock::now();
  CHECK(d.start() <= armed);
  CHECK(armed - d.start() < milliseconds(10));
  CHECK_FALSE(d.expired());
  CHECK(d.remaining() > milliseconds(5));
  d.arm();  // a later wait does not restart it
  std::this_thread::sleep_for(milliseconds(30));
  CHECK(d.expired());
  CHECK(d.elapsed() >= milliseconds(20));
  CHECK(d.elapsed() < milliseconds(60));
  // Any question asked of it starts it too: a waiter that never arms is still bounded.
  Deadline q = Deadline::from_first_wait(milliseconds(20));
  std::this_thread::sleep_for(milliseconds(30));
  CHECK_FALSE(q.expired());
  std::this_thread::sleep_for(milliseconds(30));
  CHECK(q.expired());
  // No timeout: never expires, and its elapsed time counts from its first wait, not from the clock's epoch.
  Deadline n = Deadline::from_first_wait(dcomm::kNoTimeout);
  n.arm();
  CHECK_FALSE(n.expired());
  CHECK(n.remaining() == dcomm::kNoTimeout);
  CHECK(n.elapsed() < milliseconds(1000));
}

TEST_CASE("a deadline never ends early, and the coarse clock is the steady clock's time line", "[common]") {
  // A deadline is measured against the steady clock from its own start (the coarse clock cannot start one: on a
  // tickless kernel it lagged by more than a tick and a deadline from it ended at 11.8 of 15 ms).
  for (int round = 0; round < 5; ++round) {
    const auto before = Clock::now();
    Deadline d = Deadline::after(std::chrono::milliseconds(15));
    CHECK(d.start() >= before);
    while (!d.expired()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    CHECK(Clock::now() - before >= std::chrono::milliseconds(15));
    CHECK(d.elapsed() >= std::chrono::milliseconds(15));
  }
  const auto c = coarse_now(), s = Clock::now();
  CHECK(c <= s);  // behind the steady clock, never ahead: it only stamps records
}

namespace {

// Two threads pinned to one CPU, as ranks that the scheduler put on one core although each may run anywhere
// (mpirun --bind-to none): the waiter's spin cannot let the other run; its first yield does, and returns only after
// the other's 300 us of work. A scheduler tick may preempt the waiter within its 20 us of spin (then no yield of its
// own ran): up to 5 tries, until core_shared_now(). Returns whether both threads could be pinned.
bool yield_to_a_thread_on_this_core() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return false;
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &allowed)) ++cpu;
  if (cpu >= CPU_SETSIZE) return false;
  auto pin = [cpu] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0;
  };
  bool pinned = true;
  for (int attempt = 0; attempt < 5 && pinned && !Backoff::core_shared_now(); ++attempt) {
    std::atomic<int> stage{0};
    std::atomic<bool> pinned_other{false};
    std::thread other([&] {
      pinned_other = pin();
      stage.store(1);
      // Busy on the shared CPU for 300 us once the waiter has started waiting, then answer.
      while (stage.load() < 2) {
      }
      const auto t0 = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - t0 < std::chrono::microseconds(300)) {
      }
      stage.store(3);
    });
    bool pinned_me = false;
    std::thread waiter([&] {
      pinned_me = pin();
      while (stage.load() < 1) std::this_thread::yield();
      stage.store(2);
      Backoff backoff;
      while (stage.load() < 3) backoff.pause();
    });
    waiter.join();
    other.join();
    pinned = pinned_me && pinned_other;
  }
  return pinned;
}

}  // namespace

TEST_CASE("a wait whose yield let another thread run on its core spins only briefly from then on", "[common]") {
  // From the slow yield on, Backoff::core_shared_now() (every wait spins 4 polls).
  REQUIRE(yield_to_a_thread_on_this_core());
  CHECK(Backoff::core_shared_now());
  // It passes: kSharedFor without a slow yield and the core is this process's own again.
  std::this_thread::sleep_for(Backoff::kSharedFor + std::chrono::milliseconds(5));
  CHECK_FALSE(Backoff::core_shared_now());
}

TEST_CASE("a rank whose cores no other rank may use keeps spinning after a slow yield", "[common]") {
  // Bound ranks, each to cores of its own: whatever ran here during the yield was not a peer, so the waits keep
  // their spin (the case above, with the process marked alone on its cores, must not flip).
  std::this_thread::sleep_for(Backoff::kSharedFor + std::chrono::milliseconds(5));
  REQUIRE_FALSE(Backoff::core_shared_now());
  Backoff::set_cores_alone(true);
  const bool pinned = yield_to_a_thread_on_this_core();
  const bool shared = Backoff::core_shared_now();
  Backoff::set_cores_alone(false);
  REQUIRE(pinned);
  CHECK_FALSE(shared);
}

TEST_CASE("environment integers are validated, naming the variable", "[common]") {
  setenv("DCOMM_TEST_INT", "12x", 1);
  try {
    env::get_int("DCOMM_TEST_INT");
    FAIL("expected an error");
  } catch (const InvalidUsageError& e) {
    CHECK(std::string(e.what()).find("DCOMM_TEST_INT='12x'") != std::string::npos);
  }
  setenv("DCOMM_TEST_INT", "-7", 1);
  CHECK(env::get_int("DCOMM_TEST_INT", 0) == -7);
}

TEST_CASE("log: DCOMM_LOG_LEVEL in any case and as a number", "[log]") {
  using dcomm::log::Level;
  using dcomm::log::parse_level;
  Level l = Level::kWarn;
  CHECK(parse_level("INFO", &l));
  CHECK(l == Level::kInfo);
  CHECK(parse_level("Debug", &l));
  CHECK(l == Level::kDebug);
  CHECK(parse_level("WARNING", &l));
  CHECK(l == Level::kWarn);
  CHECK(parse_level("0", &l));
  CHECK(l == Level::kError);
  CHECK(parse_level("4", &l));
  CHECK(l == Level::kTrace);
  CHECK(parse_level("3", &l));
  CHECK(l == Level::kDebug);
  CHECK_FALSE(parse_level("5", &l));
  CHECK_FALSE(parse_level("verbose", &l));
  CHECK_FALSE(parse_level("", &l));
  CHECK(l == Level::kDebug);  // a refused text leaves the level alone
}
