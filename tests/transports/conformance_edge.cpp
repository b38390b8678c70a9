// The edge cases of the conformance suite: messages that arrive before their receive, cancel, a receive buffer
// too small for its message, 256 MiB, and poisoning.
#include <fmt/format.h>

#include <cstring>
#include <thread>

#include <dcomm/error.hpp>

#include "tests/transports/conformance.hpp"

namespace dcomm::test {

using transport::Mesh;
using transport::RequestPtr;

// Small and large messages that are surely in the unexpected list before their receives are posted.
void unexpected_first(Mesh& m, RankLog& log) {
  int next = (m.rank() + 1) % m.size(), prev = (m.rank() + m.size() - 1) % m.size();
  const std::size_t kSmall = 100, kLarge = 200000;
  auto small = make_payload(m.rank(), next, 1, kSmall), large = make_payload(m.rank(), next, 2, kLarge);
  auto s1 = m.isend(next, 500, small.data(), kSmall);
  auto s2 = m.isend(next, 501, large.data(), kLarge);
  for (int i = 0; i < 20; ++i) {
    m.progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::vector<uint8_t> in1(kSmall), in2(kLarge);
  auto r2 = m.irecv(prev, 501, in2.data(), kLarge);  // the later one first: matching is by tag
  auto r1 = m.irecv(prev, 500, in1.data(), kSmall);
  if (wait_ok(m, *r1, log, "small")) check_payload(log, in1, r1->received, prev, m.rank(), 1, kSmall, "small");
  if (wait_ok(m, *r2, log, "large")) check_payload(log, in2, r2->received, prev, m.rank(), 2, kLarge, "large");
  wait_ok(m, *s1, log, "send small");
  wait_ok(m, *s2, log, "send large");
}

void cancel_receive(Mesh& m, RankLog& log) {
  int next = (m.rank() + 1) % m.size();
  std::vector<uint8_t> in(32);
  auto r = m.irecv(next, 600, in.data(), in.size());  // nobody sends tag 600
  log.expect(m.cancel(*r), "cancel of a posted receive returned false");
  log.expect(r->cancelled && m.test(*r), "a cancelled receive does not test as finished");
  wait_ok(m, *r, log, "wait on a cancelled receive");
  // A receive that already matched cannot be cancelled.
  auto out = make_payload(m.rank(), m.rank(), 3, 32);
  auto s = m.isend(m.rank(), 601, out.data(), out.size());
  auto r2 = m.irecv(m.rank(), 601, in.data(), in.size());
  if (wait_ok(m, *r2, log, "self receive")) check_payload(log, in, r2->received, m.rank(), m.rank(), 3, 32, "self");
  log.expect(!m.cancel(*r2), "cancel of a finished receive returned true");
  wait_ok(m, *s, log, "self send");
}

// Rank 1 sends rank 0 1 MiB where rank 0 has room for 512 B: that receive fails, nothing is written past the
// buffer, and the next messages on the same pair still arrive.
void short_buffer(Mesh& m, RankLog& log) {
  const std::size_t kBig = 1 << 20, kRoom = 512, kGuard = 256;
  if (m.rank() == 1) {
    auto big = make_payload(1, 0, 4, kBig), next = make_payload(1, 0, 5, 300);
    auto s1 = m.isend(0, 700, big.data(), kBig);
    auto s2 = m.isend(0, 701, next.data(), next.size());
    wait_ok(m, *s1, log, "send of the message that does not fit");
    wait_ok(m, *s2, log, "send after it");
    return;
  }
  if (m.rank() != 0) return;
  std::vector<uint8_t> area(kGuard + kRoom + kGuard, 0xA5);
  auto r = m.irecv(1, 700, area.data() + kGuard, kRoom);
  try {
    m.wait(*r, Deadline::after(std::chrono::seconds(60)), "short buffer");
    log.failures.push_back("a 1 MiB message into a 512 B buffer did not fail");
  } catch (const InvalidUsageError& e) {
    std::string text = e.what();
    log.expect(text.find("recv from rank 1 tag 700: message of 1.0 MiB does not fit the 512 B buffer") !=
                   std::string::npos,
               "unexpected error text: " + text);
  } catch (const std::exception& e) {
    log.failures.push_back(std::string("wrong error type: ") + e.what());
  }
  for (std::size_t i = 0; i < kGuard; ++i) {
    log.expect(area[i] == 0xA5 && area[kGuard + kRoom + i] == 0xA5, fmt::format("guard byte {} changed", i));
    if (area[i] != 0xA5 || area[kGuard + kRoom + i] != 0xA5) break;
  }
  log.expect(!m.poisoned(), "a short receive buffer poisoned the mesh");
  std::vector<uint8_t> in(kRoom);
  auto r2 = m.irecv(1, 701, in.data(), in.size());
  if (wait_ok(m, *r2, log, "message after the short one")) check_payload(log, in, r2->received, 1, 0, 5, 300, "next");
}

void case_big_message(Mesh& m, RankLog& log) {
  const std::size_t kBytes = std::size_t{256} << 20;
  if (m.rank() > 1) return;
  std::vector<uint64_t> buf(kBytes / 8);
  auto word = [](std::size_t i) { return (i + 1) * 0x9E3779B97F4A7C15ull ^ (i >> 7); };
  if (m.rank() == 0) {
    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = word(i);
    auto s = m.isend(1, 800, buf.data(), kBytes);
    wait_ok(m, *s, log, "256 MiB send");
    return;
  }
  auto r = m.irecv(0, 800, buf.data(), kBytes);
  if (!wait_ok(m, *r, log, "256 MiB recv")) return;
  log.expect(r->received == kBytes, fmt::format("256 MiB recv got {} bytes", r->received));
  for (std::size_t i = 0; i < buf.size(); ++i) {
    if (buf[i] != word(i)) {
      log.failures.push_back(fmt::format("256 MiB: word {} differs", i));
      break;
    }
  }
}

void case_poison_after_timeout(Mesh& m, RankLog& log) {
  int next = (m.rank() + 1) % m.size();
  std::vector<uint8_t> in(16);
  auto r = m.irecv(next, 900, in.data(), in.size());  // nobody sends tag 900
  std::string first;
  try {
    m.wait(*r, Deadline::after(std::chrono::milliseconds(300)), "poison test");
    log.failures.push_back("a receive nobody sends completed");
  } catch (const TimeoutError& e) {
    first = e.what();
    auto want = fmt::format("poison test: recv from rank {} (tag 900) over {} (16 B) not done after", next,
                            m.transport_name(next));
    log.expect(first.find(want) != std::string::npos, "timeout text lacks '" + want + "': " + first);
    log.expect(first.find("timeout 300 ms") != std::string::npos, "timeout text lacks the timeout: " + first);
  }
  log.expect(m.poisoned() != nullptr, "a timeout did not poison the mesh");
  try {
    m.isend(next, 901, in.data(), in.size());
    log.failures.push_back("isend on a poisoned mesh did not throw");
  } catch (const TimeoutError& e) {
    log.expect(first == e.what(), fmt::format("poisoned isend threw '{}', not the first cause", e.what()));
  }
}

}  // namespace dcomm::test
