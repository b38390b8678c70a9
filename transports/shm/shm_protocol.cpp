#include "transports/shm/shm_protocol.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include <dcomm/error.hpp>

#include "common/env.hpp"
#include "transports/shm/shm_cma.hpp"

namespace dcomm::transport::shm {
namespace {

constexpr std::size_t kCalibrationBytes = std::size_t{2} << 20;
constexpr int kCalibrationRounds = 3;
// Streaming must win by ProtocolHistory::kStreamMargin: it needs both ranks running (and the sender progressing),
// CMA only the receiver.
constexpr uint64_t kLargestSize = uint64_t{1} << 30;

using Seconds = std::chrono::duration<double>;

template <class F>
double best_seconds(F&& f) {
  double best = 1e30;
  for (int i = 0; i < kCalibrationRounds; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, Seconds(std::chrono::steady_clock::now() - t0).count());
  }
  return std::max(best, 1e-9);
}

Calibration measure() {
  std::vector<char> src(kCalibrationBytes), dst(kCalibrationBytes);
  // Touch both first: neither copy should pay the page faults of fresh memory.
  std::memset(src.data(), 0x5a, src.size());
  std::memset(dst.data(), 0, dst.size());
  Calibration c;
  const double bytes = static_cast<double>(kCalibrationBytes);
  c.copy_gbps = bytes / best_seconds([&] { std::memcpy(dst.data(), src.data(), src.size()); }) / 1e9;
  const pid_t self = ::getpid();
  const auto addr = reinterpret_cast<uint64_t>(src.data());
  if (cma_read(self, dst.data(), addr, 8) != 0) return c;  // no CMA here at all: cma_gbps stays 0
  c.cma_call_us = best_seconds([&] { (void)cma_read(self, dst.data(), addr, 8); }) * 1e6;
  c.cma_gbps = bytes / best_seconds([&] { (void)cma_read(self, dst.data(), addr, src.size()); }) / 1e9;
  return c;
}

double cma_us(const Calibration& cal, double n) { return cal.cma_call_us + n / (cal.cma_gbps * 1e3); }

double stream_us(const Calibration& cal, double n, double chunk, bool two_way) {
  return ((two_way ? kTwoWayFactor : 1.0) * n + std::min(n, chunk)) / (cal.copy_gbps * 1e3);
}

}  // namespace

ProtocolMode protocol_mode_from_env() {
  auto v = env::get("DCOMM_SHM_PROTOCOL");
  // The default measures each protocol's outcome per peer and size (shm_protocol.hpp: which one wins depends on
  // where the cores are, and that changes while a job runs).
  if (!v || v->empty() || *v == "measured") return ProtocolMode::kMeasured;
  if (*v == "cma") return ProtocolMode::kCma;
  if (*v == "auto") return ProtocolMode::kAuto;
  if (*v == "stream") return ProtocolMode::kStream;
  throw InvalidUsageError(fmt::format("DCOMM_SHM_PROTOCOL={} is not one of measured, auto, cma, stream", *v));
}

const char* to_string(ProtocolMode m) {
  switch (m) {
    case ProtocolMode::kMeasured: return "measured";
    case ProtocolMode::kAuto: return "auto";
    case ProtocolMode::kCma: return "cma";
    case ProtocolMode::kStream: return "stream";
  }
  return "?";
}

const char* to_string(LargeProtocol p) { return p == LargeProtocol::kCma ? "cma" : "stream"; }

int ProtocolHistory::class_of(uint64_t bytes) {
  int c = 0;
  while (c + 1 < kClasses && (uint64_t{1} << (c + 1)) <= bytes) ++c;
  return c;
}

LargeProtocol ProtocolHistory::pick(uint64_t bytes) {
  Cell& cell = cells_[class_of(bytes)];
  const double cma = cell.per_byte[static_cast<int>(LargeProtocol::kCma)];
  const double stream = cell.per_byte[static_cast<int>(LargeProtocol::kStream)];
  // Each protocol kTriesEach times first, taking turns, CMA first: a first message's time is not the protocol's
  // (record() replaces it with the second's).
  const unsigned cmas = cell.samples[static_cast<int>(LargeProtocol::kCma)];
  const unsigned streams = cell.samples[static_cast<int>(LargeProtocol::kStream)];
  if (cmas < kTriesEach || streams < kTriesEach) return cmas <= streams ? LargeProtocol::kCma : LargeProtocol::kStream;
  const LargeProtocol best = stream * kStreamMargin < cma ? LargeProtocol::kStream : LargeProtocol::kCma;
  const LargeProtocol other = best == LargeProtocol::kCma ? LargeProtocol::kStream : LargeProtocol::kCma;
  const double best_cost = best == LargeProtocol::kCma ? cma : stream * kStreamMargin;
  const double other_cost = best == LargeProtocol::kCma ? stream * kStreamMargin : cma;
  // Tries further apart only once the loser has lost beyond its first tries twice more (at picks 32 and 64): a
  // protocol whose first messages were slow by accident is not left untried for hundreds of messages.
  const bool confirmed = cell.samples[static_cast<int>(other)] >= kTriesEach + 2;
  const unsigned every = confirmed ? explore_every(other_cost, best_cost) : kExploreEvery;
  return explores(++cell.picks, other_cost < kCloseCall * best_cost, every) ? other : best;
}

unsigned ProtocolHistory::explore_every(double other, double best) {
  if (!(best > 0) || !(other > kCloseCall * best)) return kExploreEvery;
  const double apart = std::floor(other / (kCloseCall * best));
  return apart * kExploreEvery >= kExploreMaxEvery ? kExploreMaxEvery : kExploreEvery * static_cast<unsigned>(apart);
}

void ProtocolHistory::record(LargeProtocol p, uint64_t bytes, double seconds) {
  if (bytes == 0) return;
  // A class's first message by a protocol pays for first touches (the ring's stream pages, the buffers' pages):
  // 5.9 ms against 0.09 for the next streams of 4 MiB measured on 3 ranks. Averaged in, it kept that protocol
  // from being taken for hundreds of messages (explored once in kExploreEvery); the second message replaces it.
  Cell& cell = cells_[class_of(bytes)];
  const int i = static_cast<int>(p);
  double& avg = cell.per_byte[i];
  const double x = std::max(seconds, 0.0) / static_cast<double>(bytes);
  avg = cell.samples[i]++ < 2 ? x : avg + (x - avg) * (x < avg ? kFallWeight : kRiseWeight);
}

double ProtocolHistory::per_byte(LargeProtocol p, uint64_t bytes) const {
  return cells_[class_of(bytes)].per_byte[static_cast<int>(p)];
}

const Calibration& calibration() {
  static std::once_flag once;
  static Calibration cal;
  std::call_once(once, [] { cal = measure(); });
  return cal;
}

double stream_seconds(Clock::time_point cts, Clock::time_point first_piece, Clock::time_point end, double copied,
                      bool two_way, bool pulled) {
  const bool exchange = two_way && !pulled && first_piece != Clock::time_point{};
  const Clock::time_point from = exchange ? first_piece : cts;
  return std::chrono::duration<double>(end - from).count() + (exchange ? copied : 0.0);
}

LargeProtocol choose(ProtocolMode mode, const Calibration& cal, const MessageFacts& m) {
  if (!m.cma_allowed) return LargeProtocol::kStream;
  switch (mode) {
    case ProtocolMode::kCma:
    case ProtocolMode::kMeasured:  // the transport asks its ProtocolHistory instead; CMA where it cannot
      return LargeProtocol::kCma;
    case ProtocolMode::kStream: return LargeProtocol::kStream;
    case ProtocolMode::kAuto: break;
  }
  if (m.shares_core || m.streams_stall || cal.cma_gbps <= 0 || cal.copy_gbps <= 0) return LargeProtocol::kCma;
  const auto n = static_cast<double>(m.bytes);
  const double stream = stream_us(cal, n, static_cast<double>(m.chunk_bytes), m.two_way);
  return stream * ProtocolHistory::kStreamMargin < cma_us(cal, n) ? LargeProtocol::kStream : LargeProtocol::kCma;
}

uint64_t stream_threshold(const Calibration& cal, uint64_t from, uint64_t chunk_bytes, bool two_way) {
  MessageFacts m;
  m.chunk_bytes = chunk_bytes;
  m.cma_allowed = true;
  m.two_way = two_way;
  uint64_t n = 1;
  while (n < from) n *= 2;
  for (; n <= kLargestSize; n *= 2) {
    m.bytes = n;
    if (choose(ProtocolMode::kAuto, cal, m) == LargeProtocol::kStream) return n;
  }
  return 0;
}

std::string describe(const Calibration& cal) {
  if (cal.cma_gbps <= 0) return fmt::format("copy {:.1f} GB/s, process_vm_readv not allowed", cal.copy_gbps);
  return fmt::format("copy {:.1f} GB/s, process_vm_readv {:.1f} GB/s + {:.2f} us a call", cal.copy_gbps,
                     cal.cma_gbps, cal.cma_call_us);
}

}  // namespace dcomm::transport::shm
