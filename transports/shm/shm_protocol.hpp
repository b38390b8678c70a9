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
// A pair that shares a core (both ranks bound to one core, or a node running more ranks than cores) takes CMA:
// a stream needs both ranks running at once, and every full or empty ring would cost a context switch.
// The outcome is measured too: a stream whose sender stops feeding it is finished by the receiver's own read
// (shm_stream.cpp), and a peer whose recent streams mostly ended so (a loaded machine: the sender is off its core
// when its turn comes) gets CMA, with one message in kStallProbeEvery streamed to see whether that has passed.
// Streaming also needs the sender to progress (it feeds the ring from its own wait loop), while CMA needs only
// the receiver: the 1.25 margin leans toward the protocol that depends on one rank.
// The choice is opt-in (DCOMM_SHM_PROTOCOL=auto): by default every large message takes CMA, because on the quiet VM
// auto was bimodal run to run (sendrecv 0.49-0.54x MPI's time from 1 MiB in one run, 1.0-1.3x in the next once
// its streams were pulled, and 2-3.8x at 64-256 KiB; cma 0.92-1.23x in the same runs). DCOMM_SHM_PROTOCOL=stream
// forces streaming (tests, benchmarks); DCOMM_SHM_CMA=0 forbids CMA altogether, and then every large message
// streams.

#include <cstdint>
#include <string>

namespace dcomm::transport::shm {

enum class ProtocolMode { kAuto, kCma, kStream };
enum class LargeProtocol { kCma, kStream };

/// DCOMM_SHM_PROTOCOL: cma (default), auto or stream; throws InvalidUsageError naming the variable otherwise.
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

/// Pure: the protocol of one message. Never kCma where CMA is not allowed.
LargeProtocol choose(ProtocolMode mode, const Calibration& cal, const MessageFacts& m);

/// The smallest power of two from `from` up to 1 GiB that `choose` streams in auto mode, or 0 for none:
/// for the log line that says what a process decided.
uint64_t stream_threshold(const Calibration& cal, uint64_t from, uint64_t chunk_bytes, bool two_way);

/// "copy 15.2 GB/s, process_vm_readv 3.9 GB/s + 1.2 us a call" for logs.
std::string describe(const Calibration& cal);

}  // namespace dcomm::transport::shm
