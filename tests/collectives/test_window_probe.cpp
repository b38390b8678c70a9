// The window probe (collectives/window_probe.hpp): its small price, one answer on every rank, the window and buffers
// it keeps, its patterns timed with the ranks on different CPUs, the slow-window mark, and the notes a rank sends in
// an exchange (threads as ranks on a real mesh). The choices the model makes from its answers:
// test_one_node_choices.cpp.

#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/cost_model.hpp"
#include "collectives/shm_segments.hpp"
#include "collectives/slots.hpp"
#include "collectives/topology.hpp"
#include "collectives/window_probe.hpp"
#include "tests/collectives/harness.hpp"

using namespace dcomm;
using namespace dcomm::coll;

TEST_CASE("the window probe's small price: the pattern less two barriers a byte, on a grid of powers of two",
          "[collectives][engine]") {
  // (2.47 - 2 x 0.29) us / 64 KiB = 0.0288 ns -> 2^-35 s = 0.0291 ns; 2.55 us the same (stable run to run).
  CHECK(small_price(2.47e-6, 0.29e-6) == std::exp2(-35.0));
  CHECK(small_price(2.55e-6, 0.30e-6) == std::exp2(-35.0));
  CHECK(small_price(20e-6, 0.3e-6) == std::exp2(std::round(std::log2(19.4e-6 / 65536))));
  CHECK(small_price(0.5e-6, 0.3e-6) == 0.0);  // the barriers took it all: not measured
}

TEST_CASE("the window probe: one answer on every rank, DCOMM_SHM_CACHED forces it, explain() says which",
          "[collectives][engine]") {
  // Unforced, whatever this machine measures, every rank must take the same answer (the rounds of shm_direct
  // depend on it): compare what each rank's explain() reports.
  for (const char* forced : {"", "1", "0"}) {
    test::ScopedEnv env("DCOMM_SHM_CACHED", forced[0] != 0 ? forced : nullptr);
    for (int size : {2, 3}) {
      std::vector<std::string> notes(static_cast<std::size_t>(size));
      auto recs = test::run_group(
          size,
          [&](const GroupView& view, test::RankRecord& rec) {
            auto engine = Engine::create(view);
            const std::string text = engine->explain(Collective::kAllReduce, std::size_t{1} << 20);
            const std::size_t at = text.find("shared-memory windows: ");
            if (at == std::string::npos) {
              rec.failures.push_back("explain() does not say how the windows are filled: " + text);
              return;
            }
            const std::string note = text.substr(at, text.find(')', at) - at);
            notes[static_cast<std::size_t>(view.rank)] = note;
            if (forced[0] != 0) {
              const std::string want = fmt::format("DCOMM_SHM_CACHED={}: {}", forced,
                                                   forced[0] == '1' ? "plain stores" : "non-temporal stores");
              if (note.find(want) == std::string::npos) rec.failures.push_back(note + " where " + want + " was expected");
            }
          },
          "shm");
      CHECK(test::summarize(recs) == std::vector<std::string>{});
      for (const std::string& n : notes) CHECK(n == notes[0]);
    }
  }
}

TEST_CASE("the window probe keeps its window and buffers from one measurement to the next", "[collectives][engine]") {
  // ProbeRig (window_probe.hpp): ranks 0 and 1 make it at the first measurement and measure in it again; the other
  // ranks hold none. Every rank takes the same answer each time.
  test::ScopedEnv env("DCOMM_SHM_CACHED", nullptr);
  std::vector<std::string> notes(3);
  auto recs = test::run_group(
      3,
      [&](const GroupView& view, test::RankRecord& rec) {
        std::unique_ptr<ProbeRig> rig;
        std::string first, second;
        probe_cached_windows(view, true, &first, test::soon(), "test", &rig);
        const ShmWindows* win = rig ? rig->win.get() : nullptr;
        if ((view.rank < 2) != (win != nullptr)) {
          rec.failures.push_back(fmt::format("rank {}: {} rig after the first measurement", view.rank,
                                             win != nullptr ? "a" : "no"));
        }
        probe_cached_windows(view, true, &second, test::soon(), "test", &rig);
        if ((rig ? rig->win.get() : nullptr) != win) rec.failures.push_back("the second measurement made a new window");
        if (second.find("1 MiB through a window each way") == std::string::npos)
          rec.failures.push_back("the second measurement measured nothing: " + second);
        notes[static_cast<std::size_t>(view.rank)] = first + " | " + second;
      },
      "shm");
  CHECK(test::summarize(recs) == std::vector<std::string>{});
  for (const std::string& n : notes) CHECK(n == notes[0]);
}

TEST_CASE("the window probe times its patterns with the two ranks on different CPUs, or says it could not",
          "[collectives][engine]") {
  // Ranks free to run anywhere often start out on one core: a pattern timed then is not what the windows cost.
  // Pinned to one CPU together, every run is refused: the probe tries 4x its repetitions (3 each way), yielding,
  // then takes the best of what it has, and says so; pinned apart, its first runs count.
  test::ScopedEnv env("DCOMM_SHM_CACHED", nullptr);
  const unsigned cpus = std::thread::hardware_concurrency();
  for (bool together : {true, false}) {
    if (!together && cpus < 2) continue;  // nothing to pin apart on
    INFO((together ? "both ranks on CPU 0" : "ranks on CPUs 0 and 1"));
    std::vector<std::string> notes(2);
    auto recs = test::run_group(
        2,
        [&](const GroupView& view, test::RankRecord& rec) {
          cpu_set_t set;
          CPU_ZERO(&set);
          CPU_SET(together ? 0 : view.rank, &set);
          if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) {
            rec.failures.push_back("could not pin the rank's thread");
            return;
          }
          probe_cached_windows(view, true, &notes[static_cast<std::size_t>(view.rank)], test::soon(), "test");
        },
        "shm");
    CHECK(test::summarize(recs) == std::vector<std::string>{});
    CHECK(notes[0] == notes[1]);
    CHECK(notes[0].find(together ? "(0 of 24 runs with the two ranks on different CPUs)"
                                 : "(6 of 6 runs with the two ranks on different CPUs)") != std::string::npos);
    UNSCOPED_INFO(notes[0]);
  }
}

TEST_CASE("a call's plain window stores slower than the probe's non-temporal pattern mark the windows slow",
          "[collectives][engine]") {
  // note_window_round (collectives/window_probe.hpp): the probe's pattern moves 2 MiB a rank; a call that copied
  // `copied` bytes is slow past DCOMM_SHM_SLOW_FACTOR (2.5) times the pattern's non-temporal time for those bytes.
  auto hierarchy = std::make_shared<Hierarchy>();
  hierarchy->topo.window_streamed_seconds = 100e-6;
  GroupView view;
  view.size = 2;
  view.hierarchy = hierarchy;
  Args args;
  args.coll = Collective::kAllGather;
  const Deadline deadline = test::soon();
  Context c(args, view, deadline, 1, "all_gather[shm_rounds] rank 0/2", 0);
  note_window_round(c, std::size_t{2} << 20, 1e-3);  // nobody listens: nothing to set, no crash
  WindowsWatch watch;
  c.windows = &watch;
  note_window_round(c, std::size_t{2} << 20, 240e-6);
  CHECK((watch.judged && !watch.slow));
  note_window_round(c, std::size_t{1} << 20, 120e-6);
  CHECK_FALSE(watch.slow);
  note_window_round(c, std::size_t{1} << 20, 130e-6);  // 2.6x the 50 us predicted for 1 MiB
  CHECK(watch.slow);
  watch = {};
  hierarchy->topo.window_streamed_seconds = 0;  // not measured: never judged
  note_window_round(c, std::size_t{1} << 20, 1.0);
  CHECK_FALSE((watch.judged || watch.slow));
}

TEST_CASE("a rank's note reaches every rank in an exchange that reads every slot, and no other",
          "[collectives][slots]") {
  // The engine's note that a rank's windows were slow (SlotChannel::set_note) rides on its next call check: every
  // rank must see the same OR of the notes, or some would measure again and others not.
  for (int size : {2, 3, 5}) {
    auto recs = test::run_group(
        size,
        [&](const GroupView& view, test::RankRecord& rec) {
          Args none;
          none.coll = Collective::kBarrier;
          const Deadline deadline = test::soon();
          Context c(none, view, deadline, 0xFFFFF, "slots test", 0);
          auto slots = SlotChannel::create(c, 64);
          if (!slots) {
            rec.failures.push_back("no slots on one host");
            return;
          }
          const int noter = size - 1;
          uint64_t seq = 1;
          auto exchange = [&](uint8_t note, int reads) {
            slots->set_note(note);
            Context call(none, view, deadline, seq++, "slots test", 0);
            slots->exchange(call, nullptr, {}, nullptr, 0, reads);
            slots->set_note(0);
            return slots->notes();
          };
          if (exchange(view.rank == noter ? 1 : 0, SlotChannel::kReadAll) != 1)
            rec.failures.push_back(fmt::format("rank {}: rank {}'s note not seen", view.rank, noter));
          if (exchange(0, SlotChannel::kReadAll) != 0) rec.failures.push_back(fmt::format("rank {}: a stale note", view.rank));
          // A rooted exchange (rank 0 only sends, the others read rank 0): no rank has read every slot.
          const uint8_t rooted = exchange(1, view.rank == 0 ? SlotChannel::kReadNone : 0);
          if (size > 2 && rooted != 0) rec.failures.push_back(fmt::format("rank {}: notes after a rooted exchange", view.rank));
          exchange(0, SlotChannel::kReadAll);  // the pending check of the rooted one
        },
        "shm");
    CHECK(test::summarize(recs) == std::vector<std::string>{});
  }
}
