// The group's executor without any ranks: inline runs on the caller's thread and tasks on the worker never overlap,
// and a task queued by another thread while inline runs start and end is never left asleep in the queue (an inline
// run ends with a plain store, which can miss such a task: the worker looks again after kInlineRecheck).

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
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
        const Executor::Entry entry = ex.try_enter_inline();
        if (entry != Executor::Entry::kNone) {
          guard.run();
          inline_runs.fetch_add(1);
          ex.leave_inline(entry);
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
  const Executor::Entry entry = ex.try_enter_inline();
  REQUIRE(entry != Executor::Entry::kNone);
  std::atomic<bool> ran{false};
  auto work = std::make_shared<CollectiveWork>("queued behind an inline run", std::chrono::seconds(10));
  ex.submit(work, [&] { ran = true; }, /*async=*/true);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK_FALSE(ran.load());  // the inline run holds it (the owner's, begun in single-thread mode: see below)
  ex.leave_inline(entry);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!ran.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  CHECK(ran.load());
  CHECK(work->wait(std::chrono::seconds(5)));
}

TEST_CASE("the first caller runs inline without a claim until another thread calls or a task is queued; the calls "
          "are numbered once each, in the order they run",
          "[executor]") {
  // Single-thread mode (Executor::try_enter_inline): the owner's entries are kOwned (no locked instruction), and
  // end for good once another thread calls; from then on every thread claims. Three threads then race blocking
  // inline calls and asynchronous tasks: no two runs overlap, and next_seq() hands out 0..N-1 once each (the owner's
  // plain count and the claims' must not lose an increment across the change of mode).
  Executor ex;
  OneAtATime guard;
  std::mutex mu;
  std::vector<uint64_t> numbers;
  auto record = [&] {
    guard.run();
    const uint64_t n = ex.next_seq();
    std::lock_guard<std::mutex> lock(mu);
    numbers.push_back(n);
  };
  // The owner alone: owned entries.
  for (int i = 0; i < 100; ++i) {
    const Executor::Entry entry = ex.try_enter_inline();
    REQUIRE(entry == Executor::Entry::kOwned);
    record();
    ex.leave_inline(entry);
  }
  // Another thread calls while the owner keeps calling.
  std::atomic<bool> stop{false};
  std::atomic<int> owned_after{0}, claimed{0};
  std::atomic<bool> shared{false};  // the other thread's first call has returned: the mode has ended
  std::vector<std::shared_ptr<CollectiveWork>> works;
  std::mutex works_mu;
  auto caller = [&](bool submits) {
    int k = 0;
    while (!stop.load()) {
      if (submits && ++k % 3 == 0) {
        auto work = std::make_shared<CollectiveWork>("task", std::chrono::seconds(10));
        ex.submit(work, record, /*async=*/true);
        {
          std::lock_guard<std::mutex> lock(works_mu);
          works.push_back(work);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));  // the queue empties between tasks
        continue;
      }
      const Executor::Entry entry = ex.try_enter_inline();
      shared.store(true);
      if (entry == Executor::Entry::kNone) continue;
      (entry == Executor::Entry::kOwned ? owned_after : claimed).fetch_add(1);
      record();
      ex.leave_inline(entry);
    }
  };
  std::thread other([&] { caller(false); });
  std::thread third([&] { caller(true); });
  // The owner (this thread) calls on.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
    const bool after = shared.load();
    const Executor::Entry entry = ex.try_enter_inline();
    if (entry == Executor::Entry::kNone) continue;
    if (after && entry == Executor::Entry::kOwned) owned_after.fetch_add(1);
    if (entry == Executor::Entry::kClaimed) claimed.fetch_add(1);
    record();
    ex.leave_inline(entry);
  }
  stop = true;
  other.join();
  third.join();
  for (auto& w : works) CHECK(w->wait(std::chrono::seconds(5)));
  // Once the other thread's first call has returned the mode has ended: the owner claims too.
  CHECK(claimed.load() > 0);
  CHECK(owned_after.load() == 0);
  CHECK(guard.overlaps.load() == 0);
  std::lock_guard<std::mutex> lock(mu);
  std::sort(numbers.begin(), numbers.end());
  bool once_each = true;
  for (std::size_t i = 0; i < numbers.size(); ++i) once_each = once_each && numbers[i] == i;
  INFO(numbers.size() << " runs");
  CHECK(once_each);
}
