#pragma once
// How data should enter a shared-memory window that a rank on another core reads next: with plain stores, which
// leave the lines in the writer's cache for the reader to fetch from there, or with non-temporal stores
// (collectives/stream_copy.hpp), which send them to memory for the reader to fetch from memory.
// Which is faster depends on the machine, by up to 3x either way, so it is measured, not assumed: on the
// VM of sessions 5-6 a line still dirty in the writer's cache crossed to the reader at ~2 GB/s and non-temporal
// stores won at every size; on the Zen 4 VM of session 7 (both cores under one L3) plain stores won 2.7x at
// 1 MiB a rank (46 against 123 us for a copy in, barrier, copy out by both ranks at once).
// The probe runs that very pattern (every rank copies 1 MiB into its window, barrier, copies the other's window
// out, barrier) between group ranks 0 and 1, three times each way, and every rank of the group takes the result.
// A run counts only with the two ranks on different CPUs at its start and end (unbound ranks often start out on
// one core): up to 4x the runs, yielding between; explain() says how many counted.
// Then the same with 64 KiB and plain stores, which prices the small rounds' window reads for the cost model
// (WindowProbe::small_seconds_per_byte): in one placement of session 9's VM all_gather[shm_rounds] took 0.4x
// all_gather[cma]'s time at 16-256 KiB, in session 8's 1.4x, while a fixed price chose cma in both.
// DCOMM_SHM_CACHED=1 or 0 on any rank forces one answer for the group (tests use it to run both paths). The
// engine measures again every kReprobeBytes (or DCOMM_SHM_REPROBE_CALLS calls): the answer changes with where the
// hypervisor puts the cores.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/context.hpp"
#include "common/deadline.hpp"

namespace dcomm::coll {

class ShmWindows;

/// Collective over a group whose ranks share one host (Engine::create, once per group; `measure` alike on every
/// rank): true when plain stores into a window reach another core faster than non-temporal ones (the time of the
/// pattern above with plain stores under 3/4 of its time with non-temporal ones). False where the windows cannot
/// be created (the algorithms that need them fall back anyway) and without `measure` (where ranks share cores a
/// reader often runs on the core that wrote the lines: plain stores measured 0.5-2x slower there, 4 ranks on 2
/// cores, session 7), unless DCOMM_SHM_CACHED says otherwise. `note` gets what was measured, for explain(). Every
/// wait is bounded by `deadline` (a dead rank fails it, named, and the error says it happened `during` what).
struct WindowProbe {
  bool cached = false;  ///< plain stores
  /// Plain stores for small calls (model size up to kShmSmallCachedBytes): where `cached`, or where the small
  /// pattern with plain stores took under 3/4 of the 1 MiB pattern's time with non-temporal ones scaled to its
  /// size. The 1 MiB answer does not carry down: in one placement of session 16's VM the 1 MiB pattern took 85 us
  /// with plain stores against 92 non-temporal (so non-temporal), while 64 KiB took 2.3 us with plain stores, and
  /// all_reduce[shm_direct] of 64 KiB took 4.2-4.3 us with plain window stores against 5.8-6.2 with non-temporal
  /// ones (the model then chose cma, 7.8-8.2).
  bool cached_small = false;
  bool forced = false;  ///< DCOMM_SHM_CACHED decided (on some rank): measuring again would change nothing
  double streamed_seconds = 0;  ///< the pattern's time with non-temporal stores (0: not measured)
  double plain_seconds = 0;     ///< the pattern's time with plain stores (0: not measured)
  /// The small pattern (kSmallProbeBytes in, barrier, out, barrier, plain stores) less its two barriers, per byte
  /// of the window (a byte copied in and a byte copied out), on a grid of powers of two (small_price); 0: not
  /// measured. CostParams::window_read_beta comes from it.
  double small_seconds_per_byte = 0;
};
inline constexpr std::size_t kSmallProbeBytes = std::size_t{64} << 10;
/// The small pattern's best time and a barrier's best time -> WindowProbe::small_seconds_per_byte.
double small_price(double pattern_seconds, double barrier_seconds);
/// What the measuring pair (group ranks 0 and 1) keeps between measurements again (the engine's: from the first
/// one on, so that a group that never measures again holds none): its window (1 MiB a rank) and the buffers it
/// copies from and to. Made anew each time, they took 0.9 ms of shared-memory setup and page faults of the ~2.6 ms
/// a measurement cost on 2 ranks (session 10), inside the call before which the group measures again.
struct ProbeRig {
  ProbeRig();
  ~ProbeRig();
  std::unique_ptr<ShmWindows> win;
  std::vector<char> src, dst;
};

/// `rig` (may be null): where ranks 0 and 1 keep their ProbeRig from one measurement to the next (the engine's);
/// both ranks hold one or neither, so they agree without a message whether to create the window again.
WindowProbe probe_cached_windows(const GroupView& view, bool measure, std::string* note, const Deadline& deadline,
                                 std::string_view during = "group creation",
                                 std::unique_ptr<ProbeRig>* rig = nullptr);

/// How often the engine measures again (EngineImpl::run, every rank after the same call): after this many bytes of
/// calls of at least 1 MiB (the cost model's n, which every rank computes alike) or this many such calls
/// (DCOMM_SHM_REPROBE_CALLS), whichever comes first. The answer can change while a group lives (the VM of session 7
/// flipped within seconds); smaller calls hardly differ either way.
inline constexpr double kReprobeBytes = double(std::size_t{1} << 30);
inline constexpr uint64_t kReprobeCalls = 1 << 16;

/// Whether this call fills the windows with plain stores, as the group's probe found for its size
/// (Topology::cached_windows, or cached_small_windows for a call whose model size is at most kShmSmallCachedBytes:
/// the cost model prices it so, CostParams::plain_windows); false on a view without a topology (a node's view
/// inside a hierarchical algorithm). Alike on every rank of a call.
bool cached_windows(const Context& c);
/// Whether the group's probe found plain stores faster at 1 MiB (Topology::cached_windows): the rounds of a call
/// that takes them are watched against the probe's time (note_window_round); a small call's are not.
bool cached_large_windows(const Context& c);

/// Where a window's byte, copied in by one core and out by another, costs this much or more (the probe's small
/// pattern: WindowProbe::small_seconds_per_byte), lines cross cores slowly, and the cost model cannot rank window
/// rows against message rows: its one-node β (0.1 ns a byte, built in) is about 4x the transport's pace in a
/// loop, and its window rows are priced from this very pattern. Half that β. Measured on 2 ranks bound: session
/// 16's placement where the model chose within 10% of the fastest row in 37 of 40 cells had 0.03 ns a byte
/// (the 64 KiB pattern 2.3 us); session 19's, 0.125 (8.5 us, plain stores still the faster at 1 MiB, 198 against
/// 301 us), where the model's choices of window rows took 2-3x the time of the message rows (broadcast 64 KiB
/// shm_direct 9.9 us, binomial 4.1, OpenMPI 3.5-4.0; scatter 1 MiB shm_direct 62-71, linear 32-35) and measured
/// choices came within 0.9-1.2x OpenMPI's time. A one-node group measures its choices there (DCOMM_TUNE=auto),
/// as under non-temporal stores. DCOMM_SHM_WINDOW_PRICE (ns a byte, on its grid) replaces the measured price.
inline constexpr double kSlowWindowSecondsPerByte = 0.05e-9;
bool windows_cross_slowly(double small_seconds_per_byte);

/// Between measurements the cores can move (the VM of session 8 flipped within seconds, and a stale answer of
/// plain stores made all_to_all[shm_rounds] 5x slower than OpenMPI until the next measurement): the rows that fill
/// windows with plain stores time their copies, and judge a call's (`copied` bytes into and out of windows and
/// places by this rank, in `seconds`) slow past DCOMM_SHM_SLOW_FACTOR (kSlowFactor) times what the probe's
/// non-temporal pattern predicts for as many bytes (Context::windows). Measured on 2 ranks (session 8): calls in the
/// placement that favours plain stores 0.25-1.5x the prediction (single rounds up to 4x: judged by call), in the
/// other 3.0-3.4x. Nothing where nobody listens, or not measured. The engine tells the group at its next call check
/// through the slots after two slow calls in a row and kSlowNoteBytes of large calls since the last measurement,
/// and every rank measures again right after that check.
inline constexpr double kSlowFactor = 2.5;
inline constexpr double kSlowNoteBytes = double(std::size_t{32} << 20);
void note_window_round(const Context& c, std::size_t copied, double seconds);

}  // namespace dcomm::coll
