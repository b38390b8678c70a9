// The group's executor without any ranks: inline runs on the caller's thread and tasks on the worker never overlap,
// and a task queued by another thread while inline runs start and end is never left asleep in the queue (an inline
// run ends with a plain store, which can miss such a task: the worker looks again after kInlineRecheck).

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/executor.hpp"

using namespace dcomm;
using dcomm::runtime::CollectiveWork;
using dcomm::runtime::Executor;

namespace {

// One operation at a time: counts the operations that found another one inside.
struct OneAtATime {
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  void run() {
    if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
    std::atomic<int> spin{0};
    while (spin.fetch_add(1, std::memory_order_relaxed) < 50) {
    }
    inside.fetch_sub(1);
  }
};

}  // namespace

TEST_CASE("tasks queued by another thread while inline runs end all run, one operation at a time", "[executor]") {
  for (int round = 0; round < 20; ++round) {
    Executor ex;
    OneAtATime guard;
    std::atomic<bool> queued_all{false};
    std::atomic<int> inline_runs{0};
    // The caller's thread: short blocking calls, each run inline when nothing is queued ahead of it, until the other
    // thread has queued its last task.
    std::thread caller([&] {
      while (!queued_all.load()) {
        if (ex.try_enter_inline()) {
          guard.run();
          inline_runs.fetch_add(1);
          ex.leave_inline();
        }
      }
    });
    // Another thread queues asynchronous tasks meanwhile.
    constexpr int kTasks = 200;
    std::atomic<int> ran{0};
    std::vector<std::shared_ptr<CollectiveWork>> works;
    for (int t = 0; t < kTasks; ++t) {
      auto work = std::make_shared<CollectiveWork>("task " + std::to_string(t), std::chrono::seconds(10));
      ex.submit(work, [&] { guard.run(); ran.fetch_add(1); }, /*async=*/true);
      works.push_back(work);
      // Mostly one task at a time, so that the queue empties and the caller runs inline between them.
      std::this_thread::sleep_for(std::chrono::microseconds(t % 4 == 0 ? 0 : 20));
    }
    queued_all = true;
    caller.join();
    // Every task ends soon after the inline runs stop: none waits for a wake-up that never comes (a missed one
    // costs kInlineRecheck at most, each task after it runs at once).
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (ran.load() < kTasks && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    INFO("round " << round << ": " << ran.load() << " of " << kTasks << " tasks ran, " << inline_runs.load()
                  << " inline runs");
    REQUIRE(ran.load() == kTasks);
    for (auto& w : works) CHECK(w->is_completed());
    CHECK(guard.overlaps.load() == 0);
    CHECK(inline_runs.load() > 0);
  }
}

TEST_CASE("a task queued while an inline run holds the executor runs once it ends, without another call", "[executor]") {
  Executor ex;
  REQUIRE(ex.try_enter_inline());
  std::atomic<bool> ran{false};
  auto work = std::make_shared<CollectiveWork>("queued behind an inline run", std::chrono::seconds(10));
  ex.submit(work, [&] { ran = true; }, /*async=*/true);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK_FALSE(ran.load());  // the inline run holds it
  ex.leave_inline();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!ran.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  CHECK(ran.load());
  CHECK(work->wait(std::chrono::seconds(5)));
}
