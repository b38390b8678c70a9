// The shrink agreement (rendezvous/shrink_agreement.hpp) with threads over a memory store: racing proposers, a
// dead rank, a late joiner and a member that votes abort all end in one answer for everyone.

#include <atomic>
#include <catch2/catch.hpp>
#include <dcomm/error.hpp>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "rendezvous/shrink_agreement.hpp"

using namespace dcomm;
using namespace dcomm::rdzv;

namespace {

struct Outcome {
  std::vector<int> members;  // empty: excluded
  std::string error;
};

/// Runs agree_members on every rank in `joiners` (after its delay in ms); `dead` are certainly dead.
std::vector<Outcome> run_round(int size, const std::vector<int>& delay_ms, const std::set<int>& dead,
                               std::chrono::milliseconds window, std::shared_ptr<Store> store, int round = 0) {
  std::vector<Outcome> out(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  std::vector<int> all(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) all[static_cast<std::size_t>(r)] = r;
  for (int r = 0; r < size; ++r) {
    if (dead.count(r) || delay_ms[static_cast<std::size_t>(r)] < 0) continue;
    threads.emplace_back([&, r] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms[static_cast<std::size_t>(r)]));
      ShrinkAgreement a;
      a.store = store.get();
      a.self = r;
      a.size = size;
      a.known_dead = [&dead](int x) { return dead.count(x) > 0; };
      a.join_deadline = Deadline::after(window);
      a.deadline = Deadline::after(std::chrono::seconds(20));
      a.what = "shrink rank " + std::to_string(r);
      try {
        out[static_cast<std::size_t>(r)].members = agree_members(a, round, all);
      } catch (const ExcludedError& e) {
        out[static_cast<std::size_t>(r)].error = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace

TEST_CASE("shrink agreement: the dead are left out at once, the same set everywhere", "[rendezvous][shrink]") {
  auto store = make_memory_store(std::chrono::seconds(20));
  auto t0 = std::chrono::steady_clock::now();
  auto out = run_round(5, {0, 3, 0, 1, 2}, {2}, std::chrono::seconds(15), store);
  // Not the join window: every live rank joined and rank 2 is certainly dead.
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  for (int r : {0, 1, 3, 4}) CHECK(out[static_cast<std::size_t>(r)].members == std::vector<int>{0, 1, 3, 4});
}

TEST_CASE("shrink agreement: racing joins and deaths, many times, one answer", "[rendezvous][shrink]") {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 25; ++trial) {
    const int size = 3 + trial % 5;
    std::set<int> dead;
    dead.insert(static_cast<int>(rng() % static_cast<unsigned>(size)));
    if (trial % 2) dead.insert(static_cast<int>(rng() % static_cast<unsigned>(size)));
    std::vector<int> delays(static_cast<std::size_t>(size));
    for (auto& d : delays) d = static_cast<int>(rng() % 30);
    // One slow rank: joins around the close of the short window, on either side of it.
    const int slow = static_cast<int>(rng() % static_cast<unsigned>(size));
    if (!dead.count(slow) && trial % 3 == 0) delays[static_cast<std::size_t>(slow)] = 40 + static_cast<int>(rng() % 40);
    auto out =
        run_round(size, delays, dead, std::chrono::milliseconds(60), make_memory_store(std::chrono::seconds(20)));
    std::vector<int> agreed;
    for (int r = 0; r < size; ++r) {
      if (dead.count(r)) continue;
      const Outcome& o = out[static_cast<std::size_t>(r)];
      if (o.members.empty()) {
        CHECK(o.error.find("was excluded") != std::string::npos);
        continue;
      }
      if (agreed.empty()) agreed = o.members;
      CHECK(o.members == agreed);  // the same set on every survivor
      CHECK(std::find(o.members.begin(), o.members.end(), r) != o.members.end());
    }
    for (int d : dead) CHECK(std::find(agreed.begin(), agreed.end(), d) == agreed.end());
  }
}

TEST_CASE("shrink agreement: a rank that joins after the decision is told it was excluded", "[rendezvous][shrink]") {
  auto store = make_memory_store(std::chrono::seconds(20));
  // Rank 3 neither joins nor is known dead: the others wait out the window (0.3 s), then rank 3 arrives.
  auto out = run_round(4, {0, 0, 0, -1}, {}, std::chrono::milliseconds(300), store);
  for (int r : {0, 1, 2}) CHECK(out[static_cast<std::size_t>(r)].members == std::vector<int>{0, 1, 2});
  auto late = run_round(4, {-1, -1, -1, 0}, {}, std::chrono::milliseconds(300), store);
  CHECK(late[3].members.empty());
  CHECK(late[3].error.find("shrink rank 3: this rank was excluded") != std::string::npos);
  CHECK(late[3].error.find("members [0,1,2]") != std::string::npos);
}

TEST_CASE("shrink agreement: one abort vote aborts the round for everyone; the next round commits",
          "[rendezvous][shrink]") {
  auto store = make_memory_store(std::chrono::seconds(20));
  const std::vector<int> members{0, 1, 2};
  for (int round = 0; round < 2; ++round) {
    std::vector<int> got(3, -1);
    std::vector<std::thread> threads;
    for (int r : members) {
      threads.emplace_back([&, r] {
        ShrinkAgreement a;
        a.store = store.get();
        a.self = r;
        a.size = 3;
        a.deadline = Deadline::after(std::chrono::seconds(20));
        std::this_thread::sleep_for(std::chrono::milliseconds(r * 15));
        got[static_cast<std::size_t>(r)] = agree_outcome(a, round, members, !(round == 0 && r == 1)) ? 1 : 0;
      });
    }
    for (auto& t : threads) t.join();
    CHECK(got == std::vector<int>(3, round == 0 ? 0 : 1));
  }
}

TEST_CASE("shrink agreement: a member that died before it was ready aborts the round", "[rendezvous][shrink]") {
  auto store = make_memory_store(std::chrono::seconds(20));
  std::atomic<bool> two_dead{false};
  std::vector<int> got(2, -1);
  std::vector<std::thread> threads;
  for (int r : {0, 1}) {
    threads.emplace_back([&, r] {
      ShrinkAgreement a;
      a.store = store.get();
      a.self = r;
      a.size = 3;
      a.known_dead = [&](int x) { return x == 2 && two_dead.load(); };
      a.deadline = Deadline::after(std::chrono::seconds(20));
      got[static_cast<std::size_t>(r)] = agree_outcome(a, 0, {0, 1, 2}, true) ? 1 : 0;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  two_dead = true;
  for (auto& t : threads) t.join();
  CHECK(got == std::vector<int>{0, 0});
  CHECK_THROWS_AS(
      [&] {
        ShrinkAgreement a;
        a.store = store.get();
        a.self = 0;
        a.size = 3;
        a.deadline = Deadline::after(std::chrono::milliseconds(50));
        a.join_deadline = Deadline::after(std::chrono::seconds(20));
        agree_members(a, 1, {0, 1, 2});  // nobody else joins round 1 and nobody is known dead
      }(),
      TimeoutError);
}
