// How data should enter a shared-memory window (see window_probe.hpp).
#include "collectives/window_probe.hpp"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "collectives/cost_model.hpp"
#include "collectives/dissemination.hpp"
#include "collectives/shm_segments.hpp"
#include "collectives/stream_copy.hpp"
#include "collectives/topology.hpp"
#include "common/deadline.hpp"
#include "common/env.hpp"
#include "dcomm/error.hpp"

namespace dcomm::coll {

namespace {

// The probe's call number: below the link probe's (probe.cpp) and the slots' setup (engine.cpp).
constexpr uint64_t kWindowProbeSeq = 0xFFFFE;
// A rank's part: the size of a round of all_reduce[shm_direct] with plain stores (shm_rounds.hpp), large
// enough that the two ways differ by 2-3x where they differ at all (at 64-256 KiB they tied on both machines).
constexpr std::size_t kProbeBytes = std::size_t{1} << 20;
constexpr int kRepeats = 3;
// The small pattern (window_probe.hpp, WindowProbe::small_seconds_per_byte): plain stores only, more repeats (a
// few microseconds each), and as many barriers alone to subtract.
constexpr int kSmallRepeats = 8;
// A repetition counts only when the two ranks ran on different CPUs at its start and at its end. Ranks free to
// run anywhere (mpirun --bind-to none) start out on one core, often, until the scheduler spreads them: a probe
// timed then prices the windows as if every reader ran where the writer did (an unbound 2-rank group took
// all_gather[cma] to 16 MiB after such a probe, 0.96-1.80x OpenMPI's time, against 0.42-0.71x through the windows
// in the next run). So a pattern is repeated, yielding between tries, until it has its repetitions apart or
// kTriesPer times as many tries; then the best of what it has, apart or not.
constexpr int kTriesPer = 4;
// The pair's own steps stay below this: open_windows' two, a barrier, then at most kTriesPer times
// (2·kRepeats·2 + 2·kSmallRepeats + kSmallRepeats) steps of one each.
constexpr uint32_t kGroupStepBase = 256;
static_assert(3 + kTriesPer * (4 * kRepeats + 3 * kSmallRepeats) < kGroupStepBase, "the probe's steps overlap");

// Where the two ranks of the pair ran in one repetition (sched_getcpu() at its start and at its end; -1 unknown).
struct Where {
  int16_t start[2] = {-1, -1};
  int16_t end[2] = {-1, -1};
};

bool apart(const int16_t* cpu) { return cpu[0] < 0 || cpu[1] < 0 || cpu[0] != cpu[1]; }

int16_t this_cpu() { return static_cast<int16_t>(::sched_getcpu()); }

struct Times {
  double plain = 0, streamed = 0;  // the best time each way on rank 0 or 1; 0 elsewhere
  double small = 0, barrier = 0;   // the best small pattern (plain stores) and the best barrier alone
  int8_t forced = -1;              // DCOMM_SHM_CACHED on some rank: 1 or 0; -1 none
  double price = 0;                // DCOMM_SHM_WINDOW_PRICE on some rank (seconds a byte); 0 none
  int16_t apart = 0, tries = 0;    // the 1 MiB patterns run with the two ranks on different CPUs, and all run
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Ranks 0 and 1 of the group, on their own two-rank view: the pattern, each way, kRepeats times apart (see
// kTriesPer), interleaved.
// `kept`: the rig of the last measurement (null the first time: made here, and kept where the caller keeps it).
Times measure_pair(const Context& pair, std::unique_ptr<ProbeRig>* kept) {
  Times t;
  std::unique_ptr<ProbeRig> made;
  std::unique_ptr<ProbeRig>& rig = kept != nullptr ? *kept : made;
  if (!rig) {
    auto fresh = std::make_unique<ProbeRig>();
    fresh->win = open_windows(pair, kProbeBytes, 0, "non-temporal stores");
    if (!fresh->win) return t;  // logged by open_windows; no opinion (and nothing kept: both ranks try again)
    fresh->src.resize(kProbeBytes);
    fresh->dst.resize(kProbeBytes);
    for (std::size_t i = 0; i < kProbeBytes; ++i) {
      fresh->src[i] = static_cast<char>(i * 131 + static_cast<std::size_t>(pair.rank()));
    }
    rig = std::move(fresh);
  }
  ShmWindows* const win = rig->win.get();
  const int me = pair.rank();
  std::vector<char>& src = rig->src;
  std::vector<char>& dst = rig->dst;
  uint32_t step = 2;  // above open_windows' two
  auto barrier = [&] { agree(pair, step++, uint8_t{0}, [](uint8_t&, uint8_t) {}); };
  // A repetition's last barrier, which also tells both ranks whether it ran on two CPUs (the same answer on both,
  // so both repeat alike).
  auto last_barrier = [&](int16_t start_cpu) {
    Where w;
    w.start[me] = start_cpu;
    w.end[me] = this_cpu();
    const Where all = agree(pair, step++, w, [](Where& m, const Where& o) {
      for (int i = 0; i < 2; ++i) {
        m.start[i] = std::max(m.start[i], o.start[i]);
        m.end[i] = std::max(m.end[i], o.end[i]);
      }
    });
    return apart(all.start) && apart(all.end);
  };
  // Best times of `ways` patterns, run in turn (interleaved, so that a drift of the machine touches each alike)
  // until each has `want` repetitions apart or kTriesPer·want tries were made: the best apart, or the best of all
  // where none was. `rep(way)` ends with last_barrier and returns its answer. `counted`: runs go into t.apart and
  // t.tries (the 1 MiB patterns', which explain() reports).
  auto best_of = [&](int ways, int want, bool counted, auto rep) {
    std::vector<double> apart_best(ways, 1e30), any_best(ways, 1e30);
    std::vector<int> got(ways, 0);
    for (int tries = 0; tries < kTriesPer * want && *std::min_element(got.begin(), got.end()) < want; ++tries) {
      bool moved_away = false;
      for (int way = 0; way < ways; ++way) {
        const auto t0 = std::chrono::steady_clock::now();
        const bool ok = rep(way);
        if (counted) {
          ++t.tries;
          t.apart = static_cast<int16_t>(t.apart + (ok ? 1 : 0));
        }
        const double s = seconds_since(t0);
        any_best[way] = std::min(any_best[way], s);
        if (ok) {
          apart_best[way] = std::min(apart_best[way], s);
          ++got[way];
        }
        moved_away = moved_away || !ok;
      }
      if (moved_away) std::this_thread::yield();  // let the scheduler move one of the two
    }
    for (int way = 0; way < ways; ++way) {
      if (got[way] == 0) apart_best[way] = any_best[way];
    }
    return apart_best;
  };
  barrier();
  const std::vector<double> big = best_of(2, kRepeats, true, [&](int way) {
    const int16_t cpu = this_cpu();
    if (way == 0) {
      std::memcpy(win->of(me), src.data(), kProbeBytes);
    } else {
      stream_copy(win->of(me), src.data(), kProbeBytes);
      stream_copy_fence();
    }
    barrier();
    std::memcpy(dst.data(), win->of(1 - me), kProbeBytes);
    return last_barrier(cpu);
  });
  t.plain = big[0];
  t.streamed = big[1];
  // The small pattern, in the same windows (the first kSmallProbeBytes of each), then barriers alone.
  const double small = best_of(1, kSmallRepeats, false, [&](int) {
    const int16_t cpu = this_cpu();
    std::memcpy(win->of(me), src.data(), kSmallProbeBytes);
    barrier();
    std::memcpy(dst.data(), win->of(1 - me), kSmallProbeBytes);
    return last_barrier(cpu);
  })[0];
  const double alone = best_of(1, kSmallRepeats, false, [&](int) { return last_barrier(this_cpu()); })[0];
  t.small = small;
  t.barrier = alone;
  return t;
}

}  // namespace

ProbeRig::ProbeRig() = default;
ProbeRig::~ProbeRig() = default;

namespace {

// On a grid of powers of two (as the link probe's values off the built-in ones: collectives/probe.cpp, stabilize),
// so that two measurements a few percent apart price alike and choices stay put run to run; 0 stays 0.
double on_grid(double seconds_per_byte) {
  return seconds_per_byte > 0 ? std::exp2(std::round(std::log2(seconds_per_byte))) : 0.0;
}

}  // namespace

double small_price(double pattern_seconds, double barrier_seconds) {
  return on_grid(std::max(pattern_seconds - 2.0 * barrier_seconds, 0.0) / double(kSmallProbeBytes));
}

WindowProbe probe_cached_windows(const GroupView& view, bool measure, std::string* note, const Deadline& deadline,
                                 std::string_view during, std::unique_ptr<ProbeRig>* rig) {
  if (view.size < 2 || !group_on_one_host(view)) return {};
  Args none;
  none.coll = Collective::kBarrier;
  const std::string what =
      fmt::format("collectives engine window probe rank {}/{} ({})", view.rank, view.size, during);
  Context c(none, view, deadline, kWindowProbeSeq, what, 0);
  Times mine;
  if (measure && view.rank < 2) mine = measure_pair(c.on(sub_view(view, {0, 1}), 0), rig);
  if (const auto forced = env::get_int("DCOMM_SHM_CACHED")) mine.forced = *forced != 0 ? 1 : 0;
  const double price_ns = env::get_double("DCOMM_SHM_WINDOW_PRICE", 0.0);
  if (!(price_ns >= 0)) {
    throw InvalidUsageError(fmt::format("DCOMM_SHM_WINDOW_PRICE={} must be a price in ns a byte, 0 or more", price_ns));
  }
  mine.price = price_ns * 1e-9;
  const Times all = agree(c, kGroupStepBase, mine, [](Times& m, const Times& t) {
    m.plain = std::max(m.plain, t.plain);
    m.streamed = std::max(m.streamed, t.streamed);
    m.small = std::max(m.small, t.small);
    m.barrier = std::max(m.barrier, t.barrier);
    m.forced = std::max(m.forced, t.forced);
    m.price = std::max(m.price, t.price);
    m.apart = std::max(m.apart, t.apart);
    m.tries = std::max(m.tries, t.tries);
  });
  const bool measured = all.plain > 0 && all.streamed > 0;
  const bool cached = all.forced >= 0 ? all.forced == 1 : measured && all.plain < 0.75 * all.streamed;
  const double small = all.price > 0                 ? on_grid(all.price)
                       : measured && all.small > 0 ? small_price(all.small, all.barrier)
                                                   : 0.0;
  const double scale = double(kSmallProbeBytes) / double(std::size_t{1} << 20);
  const bool cached_small =
      all.forced >= 0 ? all.forced == 1 : cached || (measured && all.small > 0 && all.small < 0.75 * scale * all.streamed);
  if (note != nullptr) {
    *note = all.forced >= 0 ? fmt::format("DCOMM_SHM_CACHED={}", all.forced)
            : measured      ? fmt::format("1 MiB through a window each way: plain stores {:.0f} us, non-temporal "
                                          "{:.0f} us ({} of {} runs with the two ranks on different CPUs)",
                                          all.plain * 1e6, all.streamed * 1e6, all.apart, all.tries)
            : measure       ? std::string("no windows")
                            : std::string("not measured where ranks share cores");
    *note += cached ? ": plain stores" : ": non-temporal stores";
    if (all.price > 0) {
      *note += fmt::format("; DCOMM_SHM_WINDOW_PRICE: {:.3f} ns a byte copied in and out", small * 1e9);
    } else if (small > 0) {
      *note += fmt::format("; 64 KiB with plain stores {:.2f} us, a barrier {:.2f} us: {:.3f} ns a byte copied in "
                           "and out",
                           all.small * 1e6, all.barrier * 1e6, small * 1e9);
    }
    if (cached_small && !cached) *note += fmt::format("; plain stores up to {}", format_bytes(kShmSmallCachedBytes));
    if (windows_cross_slowly(small)) *note += "; lines cross cores slowly: the group measures its choices";
  }
  return WindowProbe{cached, cached_small, all.forced >= 0, measured ? all.streamed : 0.0, measured ? all.plain : 0.0,
                     small};
}

bool cached_windows(const Context& c) {
  if (!c.view.hierarchy) return false;
  const Topology& t = c.view.hierarchy->topo;
  return t.cached_windows ||
         (t.cached_small_windows && model_bytes(c.args, c.size()) <= double(kShmSmallCachedBytes));
}

bool windows_cross_slowly(double small_seconds_per_byte) {
  return small_seconds_per_byte >= kSlowWindowSecondsPerByte;
}

bool cached_large_windows(const Context& c) { return c.view.hierarchy && c.view.hierarchy->topo.cached_windows; }

void note_window_round(const Context& c, std::size_t copied, double seconds) {
  if (c.windows == nullptr || !c.view.hierarchy) return;
  const double streamed = c.view.hierarchy->topo.window_streamed_seconds;
  if (streamed <= 0) return;
  static const double factor = env::get_double("DCOMM_SHM_SLOW_FACTOR", kSlowFactor);
  // The pattern moves 2 MiB a rank (1 MiB in, 1 MiB out).
  const double predicted = streamed * static_cast<double>(copied) / double(std::size_t{2} << 20);
  c.windows->judged = true;
  c.windows->slow = c.windows->slow || seconds > factor * predicted;
}

}  // namespace dcomm::coll
