#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include <dcomm/error.hpp>

#include "tests/transports/conformance.hpp"
#include "tests/ucx/ucx_peer.hpp"

namespace dcomm::test {
namespace {

using Clock = std::chrono::steady_clock;
using transport::Mesh;
using transport::RequestPtr;

constexpr Duration kWait = std::chrono::seconds(60);

int report(const RankLog& log, const char* what) {
  for (const auto& f : log.failures) std::fprintf(stderr, "%s: %s\n", what, f.c_str());
  if (log.failures.empty()) std::printf("%s ok\n", what);
  return log.failures.empty() ? 0 : 1;
}

void wait_all(Mesh& m, const std::vector<RequestPtr>& reqs, const char* what) {
  for (const auto& r : reqs) m.wait(*r, Deadline::after(kWait), what);
}

}  // namespace

int peer_pingpong(Mesh& m) {
  RankLog log;
  if (m.rank() > 1) return 0;
  const int other = 1 - m.rank();
  log.expect(std::string(m.transport_name(other)) == "ucx", fmt::format("route is {}", m.transport_name(other)));
  const std::vector<std::size_t> sizes = {0, 1, 8, 4093, 65537, (1u << 20) + 3, (16u << 20) + 1};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::size_t bytes = sizes[i];
    std::vector<uint8_t> in(bytes + 8);
    if (m.rank() == 0) {
      auto out = make_payload(0, 1, i, bytes);
      auto s = m.isend(1, 10 + i, out.data(), bytes);
      auto r = m.irecv(kAnySource, 1000 + i, in.data(), in.size());  // any-source: rank 1 is the only sender
      if (wait_ok(m, *s, log, "ping") && wait_ok(m, *r, log, "pong")) {
        log.expect(r->source == 1, fmt::format("pong {} came from rank {}", i, r->source));
        check_payload(log, in, r->received, 1, 0, i, bytes, fmt::format("pong {}", i));
      }
    } else {
      auto r = m.irecv(0, 10 + i, in.data(), in.size());
      if (wait_ok(m, *r, log, "ping")) check_payload(log, in, r->received, 0, 1, i, bytes, fmt::format("ping {}", i));
      auto out = make_payload(1, 0, i, bytes);
      auto s = m.isend(0, 1000 + i, out.data(), bytes);
      wait_ok(m, *s, log, "pong");
    }
  }
  return report(log, "pingpong");
}

int peer_kill(Mesh& m) {
  constexpr std::size_t kBig = 256u << 20;
  if (m.rank() > 1) return 0;
  std::vector<uint8_t> buf(kBig, static_cast<uint8_t>(m.rank() + 1));
  if (m.rank() == 1) {
    // Start pulling the message, then die in the middle of it.
    auto r = m.irecv(0, 2, buf.data(), kBig);
    for (int i = 0; i < 50 && !m.test(*r); ++i) std::this_thread::sleep_for(std::chrono::microseconds(200));
    ::raise(SIGKILL);
  }
  // dcomm-run stops the other ranks once rank 1 dies; stay long enough to report what the wait saw.
  ::signal(SIGTERM, SIG_IGN);
  auto s = m.isend(1, 2, buf.data(), kBig);
  uint8_t never[8];
  auto r = m.irecv(1, 3, never, sizeof(never));  // rank 1 never sends it: only its death can end this wait
  const auto start = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  try {
    m.wait(*s, Deadline::after(kWait), "kill test send");
    m.wait(*r, Deadline::after(kWait), "kill test recv");
    std::printf("SURVIVOR %.2f completed without an error\n", seconds());
    return 1;
  } catch (const RemoteError& e) {
    std::printf("SURVIVOR %.2f %s\n", seconds(), e.what());
    return std::string(e.what()).find("rank 1") != std::string::npos ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("SURVIVOR %.2f wrong error: %s\n", seconds(), e.what());
    return 1;
  }
}

int peer_bench(Mesh& m, int iterations) {
  if (m.rank() > 1) return 0;
  const int other = 1 - m.rank();
  // Latency: 8-byte ping-pong, half the round trip; the median beside the mean, as ucx_perftest's "typical",
  // because on a loaded machine a few descheduled iterations dominate the mean.
  uint64_t word = 0x0123456789abcdefull;
  const int warmup = std::max(10, iterations / 10);
  std::vector<double> half_rtt_us;
  half_rtt_us.reserve(static_cast<std::size_t>(iterations));
  Clock::time_point t0;
  for (int i = 0; i < warmup + iterations; ++i) {
    const auto start = Clock::now();
    if (i == warmup) t0 = start;
    if (m.rank() == 0) {
      wait_all(m, {m.isend(other, 20, &word, 8), m.irecv(other, 21, &word, 8)}, "latency");
    } else {
      wait_all(m, {m.irecv(other, 20, &word, 8)}, "latency");
      wait_all(m, {m.isend(other, 21, &word, 8)}, "latency");
    }
    if (i >= warmup) half_rtt_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() / 2);
  }
  const double lat_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iterations / 2;
  std::nth_element(half_rtt_us.begin(), half_rtt_us.begin() + iterations / 2, half_rtt_us.end());
  const double median_us = half_rtt_us[static_cast<std::size_t>(iterations / 2)];
  // Bandwidth: 16 MiB messages, a window of 4 in flight, one acknowledgement at the end.
  constexpr std::size_t kBytes = 16u << 20;
  constexpr int kWindow = 4;
  const int rounds = std::max(2, iterations / 500);
  std::vector<std::vector<uint8_t>> bufs(kWindow, std::vector<uint8_t>(kBytes, 7));
  uint8_t ack = 0;
  auto window = [&] {
    std::vector<RequestPtr> reqs;
    for (int w = 0; w < kWindow; ++w) {
      reqs.push_back(m.rank() == 0 ? m.isend(other, 30, bufs[w].data(), kBytes)
                                   : m.irecv(other, 30, bufs[w].data(), kBytes));
    }
    wait_all(m, reqs, "bandwidth");
  };
  window();  // warm-up: registers the buffers and sets up the rendezvous path
  wait_all(m, {m.rank() == 0 ? m.irecv(other, 31, &ack, 1) : m.isend(other, 31, &ack, 1)}, "bandwidth ack");
  t0 = Clock::now();
  for (int k = 0; k < rounds; ++k) window();
  wait_all(m, {m.rank() == 0 ? m.irecv(other, 32, &ack, 1) : m.isend(other, 32, &ack, 1)}, "bandwidth ack");
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const double mibps = static_cast<double>(kBytes) * kWindow * rounds / secs / (1 << 20);  // as ucx_perftest
  if (m.rank() == 0) {
    std::printf("BENCH transport=%s latency_8B_us median=%.2f mean=%.2f bandwidth_16MiB_MiBps=%.0f (%d x %d x 16 MiB)\n",
                m.transport_name(other), median_us, lat_us, mibps, rounds, kWindow);
  }
  return 0;
}

}  // namespace dcomm::test
