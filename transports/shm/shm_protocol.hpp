#pragma once
// Which way a large shm message travels, chosen per message by its receiver (the side that acts on it: it
// either reads the sender's buffer with process_vm_readv and acks, or sends kCts and the sender streams), so
// the two sides always agree without a field in the header.
//
// Why a choice, and why measured: CMA is one copy, done by the receiver alone, but the kernel pins every page of
// the message as it goes; on some machines that runs near memcpy speed, on others (this project's 2-core VM) at a
// fifth of it (2.5-4.7 GB/s against 13-20). Streaming is two copies, one on each side, overlapping on two cores
// through the ring, so a one-way message moves at about memcpy speed. Neither wins everywhere, so each process
// measures both costs once (calibrate(), ~2 ms: memcpy and a process_vm_readv of its own memory, 2 MiB, best of
// 3) and every large message takes the cheaper one under a simple model (choose()):
//
//   cma(n)    = call + n / cma_bw                                  the receiver's read, one syscall
//   stream(n) = k · n / copy_bw + min(n, chunk) / copy_bw          k = 1 one-way, kTwoWayFactor when this rank is
//                                                                  sending large messages too; the second term is
//                                                                  the pipeline's fill
//   stream when stream(n) · 1.25 < cma(n), and the pair does not share a core.
//
// Two-way, each core copies both directions (2 copies per byte against one read), and its drains and feeds take
// turns, so each side sees the other pause for a ring's worth of copying: on this VM, two-way streams lost to CMA
// (a quiet-machine ring all_reduce at 64 MiB: 58-62 ms streamed against 28-32 ms with CMA; rough loaded runs of
// all_to_all and all_gather the same way, with 40% of streams stalling), while one-way streams won about 2x
// (sendrecv, broadcast). kTwoWayFactor = 4 (not the 2 of the copy count) puts two-way traffic on CMA unless CMA is
// more than 5x slower than memcpy.
//
// A pair that shares a core (both ranks bound to the same single core) takes CMA: a stream needs both ranks
// running at once, and every full or empty ring would cost a context switch. A node running more ranks than cores
// does not make every pair such a pair (3 ranks on 2 cores: the pair on two cores streamed 4 MiB in 0.09 ms against
// CMA's 0.28 while the third rank waited), so its pairs take the measured choice, which sees stalls in the times.
// The outcome is measured too: a stream whose sender stops feeding it is finished by the receiver's own read
// (shm_stream.cpp), and a peer whose recent streams mostly ended so (a loaded machine: the sender is off its core
// when its turn comes) gets CMA, with one message in kStallProbeEvery streamed to see whether that has passed.
// Streaming also needs the sender to progress (it feeds the ring from its own wait loop), while CMA needs only
// the receiver: the 1.25 margin leans toward the protocol that depends on one rank.
// That model is opt-in (DCOMM_SHM_PROTOCOL=auto): on the quiet VM it was bimodal run to run (sendrecv 0.49-0.54x
// MPI's time from 1 MiB in one run, 1.0-1.3x in the next once its streams were pulled, and 2-3.8x at 64-256 KiB;
// cma 0.92-1.23x in the same runs). The model's inputs (a copy within one core, a read of the process's own memory)
// miss what decides it: how fast a line written on one core reaches the other, which on this VM changes with where
// the hypervisor puts the two cores (docs/algorithms.md, "Window stores"). In one placement streaming took
// 0.28-0.50x MPI's time for sendrecv from 64 KiB to 4 MiB where CMA took 1.0-1.1x (session 11, same minutes); in
// the other, streams ran 2-3.8x.
//
// So the default (DCOMM_SHM_PROTOCOL=measured) measures the outcome instead: each receiver keeps, per peer and per
// size class (powers of two), how long each protocol took a byte lately (ProtocolHistory: a CMA read from its call
// to its return, a stream from its kCts to its last byte, pulls and stalls included), and takes the cheaper, a
// stream only by the margin of the model above (1.25: ProtocolHistory::pick says why). It
// tries CMA and streaming in turns in each class, twice each (a first message pays for first touches), then the
// one that lost again every kExploreEvery messages of that class, so a change of placement is noticed within that
// many. DCOMM_SHM_PROTOCOL=cma or stream forces one
// (tests, benchmarks); DCOMM_SHM_CMA=0 forbids CMA altogether, and then every large message streams. A pair that
// shares a core takes CMA in every mode but stream.

#include <cstdint>
#include <string>

#include "common/deadline.hpp"

namespace dcomm::transport::shm {

enum class ProtocolMode { kMeasured, kAuto, kCma, kStream };
enum class LargeProtocol { kCma, kStream };

/// DCOMM_SHM_PROTOCOL: measured (default), auto, cma or stream; throws InvalidUsageError naming the variable
/// otherwise.
ProtocolMode protocol_mode_from_env();
const char* to_string(ProtocolMode m);
const char* to_string(LargeProtocol p);

/// What this machine's copies cost, measured once per process.
struct Calibration {
  double copy_gbps = 0;   ///< memcpy of 2 MiB
  double cma_gbps = 0;    ///< process_vm_readv of the same
  double cma_call_us = 0; ///< a process_vm_readv of 8 bytes: the fixed cost of a call
};

/// Measures once per process (later calls return the first result); bounded: a few ms.
const Calibration& calibration();

/// What a receiver knows when it picks the protocol of one large message.
struct MessageFacts {
  uint64_t bytes = 0;
  uint64_t chunk_bytes = 0;
  bool cma_allowed = false;  ///< the probe at connect succeeded and DCOMM_SHM_CMA is not 0
  bool shares_core = false;  ///< sender and receiver cannot run at the same time
  bool two_way = false;      ///< this rank has large sends of its own in flight
  bool streams_stall = false;  ///< most recent streams from this peer had to be pulled (auto mode: take CMA)
};

/// How many one-way copy times a two-way stream is counted at (see the model above).
inline constexpr double kTwoWayFactor = 4.0;

/// While a peer's streams stall, one message in this many still streams, to notice when they stop stalling.
inline constexpr unsigned kStallProbeEvery = 16;

/// The share of a peer's recent streams that had to be pulled, as a moving average over about 8 streams.
/// High from above one half to below one quarter, so that a peer near the line does not flip at every stream.
class StallRate {
 public:
  void record(bool pulled) {
    rate_ += ((pulled ? 1.0 : 0.0) - rate_) / 8;
    high_ = high_ ? rate_ >= 0.25 : rate_ > 0.5;
  }
  bool high() const { return high_; }
  double value() const { return rate_; }

 private:
  double rate_ = 0;
  bool high_ = false;
};

/// Per peer (its receiver's): what large messages cost lately, by protocol and size class, and which to take next.
class ProtocolHistory {
 public:
  /// How much cheaper a byte a stream must measure than a single copy to be taken (as auto mode's kStreamMargin).
  static constexpr double kStreamMargin = 1.25;
  /// Messages of one class between two tries of the protocol that is losing there, once the class has run
  /// kExploreEvery messages; before, where the loser's cost is within kCloseCall of the winner's (the margin
  /// counted), it is tried at the 2nd, 4th, 8th and 16th (explores()): an early sample that was slow by accident
  /// (lines still in the sender's cache, a first touch) is corrected within a few messages instead of after
  /// kExploreEvery. 2 ranks bound, scatter[linear] of 64 KiB: the tuner saw the 32 KiB class stream (single copies
  /// measured slow at first) in 3 of 10 runs, 5.7-7.4 us a call against 3.8-4.4, and chose the windows; with CMA
  /// forced, 10 of 10 at 3.7-4.6. Not where the loser is far behind: every early try costs its whole difference
  /// (4 ranks on 2 cores, sendrecv of 16 MiB, where a stream waits for its sender's turn on a core).
  static constexpr unsigned kExploreEvery = 32;
  static constexpr double kCloseCall = 2.0;
  /// Where the loser is further behind than kCloseCall, its tries come further apart, in proportion
  /// (explore_every()): each costs the whole difference, so one every 32 messages of a protocol 8x slower adds 22% to
  /// the class's time. 2 ranks bound, broadcast[chain] at 64 KiB and 256 KiB (one message a call): 4.0-4.1 and
  /// 7.9-8.2 us a call (p99 11-12 and 32-33) against 3.4-3.6 and 7.1-7.3 with single copies forced (session 29). At
  /// most this many messages apart: a change of placement that makes the loser win is still noticed within them.
  /// Only once the loser has lost at two tries after its first kTriesEach (pick()).
  static constexpr unsigned kExploreMaxEvery = 512;
  /// How far one message moves a class's average toward its time: most of the way when it took less (a protocol
  /// did that well; timing noise here is delay, rarely speed), a quarter of the way when it took more.
  static constexpr double kFallWeight = 0.75;
  static constexpr double kRiseWeight = 0.25;
  /// Messages each protocol takes in a class before the two are compared: a first message's time is not the
  /// protocol's (first touches; record() replaces it with the second's). Compared after one each, a first single
  /// copy that paid for its pages lost to streaming for the class's next kExploreEvery messages: 32 KiB messages on
  /// 2 ranks bound took 7.2-7.9 us streamed against 3.8-4.2 by single copies (session 19), and scatter[linear] of
  /// 64 KiB measured 7.7-9.0 us a call in the tuner's first calls (against 4.9-6.2 with CMA forced), which then
  /// chose shm_direct (5.6-6.5 in a loop) over linear (3.0-4.0).
  static constexpr unsigned kTriesEach = 2;
  /// The protocol for a message of `bytes`: CMA and streaming in turns, CMA first, until each has been measured
  /// kTriesEach times in its class; then CMA unless streaming measured under 1/1.25 of its time a byte (the margin
  /// of auto mode: a stream needs both ranks, a single copy the receiver alone), but the other every kExploreEvery
  /// messages. A receiver times its own side only: a stream also puts a copy on the sender's core, which a pattern
  /// paced by its sender pays. Without the margin, scatter[linear] of 64 KiB on 2 ranks bound beside OpenMPI went
  /// streamed in 3 of 8 runs (120-135 of 152 messages; 6.1-6.8 us a call against 3.4-4.0 by single copies) and
  /// the tuner measured it so; with it, single copies in 8 of 8 (session 19). Where streams win they win by more
  /// (2-3.5x: sendrecv in session 11's placement; all_gather[ring] 4 MiB exchanges, 157-175 against 467-475 us).
  LargeProtocol pick(uint64_t bytes);
  /// A message of `bytes` took `seconds` by `p`: a moving average from the second message on (the first, which pays
  /// for first touches, is replaced by the second), falling by kFallWeight and rising by kRiseWeight.
  void record(LargeProtocol p, uint64_t bytes, double seconds);
  /// Whether a class's `picks`-th pick after its tries (from 1) tries the losing protocol (kExploreEvery): early
  /// too when the two are a `close` call.
  static bool explores(unsigned picks, bool close, unsigned every = kExploreEvery) {
    if (picks < kExploreEvery) return close && picks >= 2 && (picks & (picks - 1)) == 0;
    return picks % every == 0;
  }
  /// Messages between two tries of the loser (from kExploreEvery on), whose cost is `other` where the winner's is
  /// `best`: kExploreEvery·⌊other / (kCloseCall·best)⌋, at least kExploreEvery, at most kExploreMaxEvery - so the
  /// tries cost at most (2·kCloseCall - 1)/kExploreEvery (9%) of a message's time, whatever the gap.
  static unsigned explore_every(double other, double best);
  /// The average seconds a byte of `p` in the class of `bytes`, or a negative number before any measurement.
  double per_byte(LargeProtocol p, uint64_t bytes) const;

 private:
  static constexpr int kClasses = 48;  ///< class = log2(bytes)
  struct Cell {
    double per_byte[2] = {-1, -1};  ///< by LargeProtocol
    unsigned samples[2] = {0, 0};   ///< messages recorded, by LargeProtocol
    unsigned picks = 0;
  };
  static int class_of(uint64_t bytes);
  Cell cells_[kClasses];
};

/// What a finished stream cost, for ProtocolHistory::record: from its kCts to `end`, the sender's answer and a
/// pull's wait and reads included - except in an exchange (`two_way`: this rank had large sends in flight when it
/// started) that the sender fed to the end (not `pulled`, a `first_piece` arrived): there, from its first piece, plus
/// `copied`, the sender's copies of the pieces into the ring (each kData says how long its copy took).
/// Why not from the kCts in an exchange: the wait is the sender's own single copy of this rank's message. Timed so,
/// streams lost to single copies in exchanges, and all_gather[ring] of 4 MiB on 2 ranks took 475 us a call by single
/// copies against 170 streamed (session 16). Why the sender's copies: in an exchange its core has the same work to
/// do, so its copies into the ring cost the exchange as much as this rank's out of it, and a stream of one piece timed
/// from that piece leaves them out altogether. Without them, 32 KiB messages of an exchange streamed in 20-45% of
/// picks (all_to_all[bruck] of 64 KiB on 2 ranks: 421-922 of 2,050) at 5.4 us a call streamed against 3.3 by single
/// copies (session 32). A copy from the sender's cache is cheaper than one across cores, which the sender's own
/// time tells: all_gather[ring] sent its blocks just written, and streamed them at 5.9 us a call against 7.7 by
/// single copies, which then read lines still in the sender's cache. One way, the sender's answer is the stream's
/// own cost (timed from the first piece, 128-512 KiB went streamed at 1.15-1.25x the single copy's time where lines
/// cross cores slowly).
double stream_seconds(Clock::time_point cts, Clock::time_point first_piece, Clock::time_point end, double copied,
                      bool two_way, bool pulled);

/// Pure: the protocol of one message. Never kCma where CMA is not allowed.
LargeProtocol choose(ProtocolMode mode, const Calibration& cal, const MessageFacts& m);

/// The smallest power of two from `from` up to 1 GiB that `choose` streams in auto mode, or 0 for none:
/// for the log line that says what a process decided.
uint64_t stream_threshold(const Calibration& cal, uint64_t from, uint64_t chunk_bytes, bool two_way);

/// "copy 15.2 GB/s, process_vm_readv 3.9 GB/s + 1.2 us a call" for logs.
std::string describe(const Calibration& cal);

}  // namespace dcomm::transport::shm
