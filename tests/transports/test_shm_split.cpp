// The split read of a single-copy shm message (transports/shm/shm_split.hpp): the claims on their own, the two
// sides racing for them, and whole transfers between ranks (threads) whose sender helps, or is away.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "tests/transports/conformance.hpp"
#include "tests/transports/world.hpp"
#include "transports/shm/shm_split.hpp"

using namespace dcomm::transport::shm;

namespace {

// Claims every byte of a `bytes` message, front and back taking turns (or only the front), and counts how often
// each byte was claimed; returns the bytes the back took.
uint64_t claim_all(uint64_t bytes, bool back_helps, std::vector<int>& seen) {
  SplitBoard b;
  split_open(b, 7, bytes, 70);
  seen.assign(bytes, 0);
  const uint64_t piece = split_piece(bytes);
  uint64_t front_at = 0, back_at = bytes, back_bytes = 0;
  for (bool front = true;; front = back_helps ? !front : true) {
    SplitClaim c = split_take(b, 7, bytes, piece, front);
    if (c.empty()) break;  // the claims met: nothing is left at either end
    CHECK(c.end - c.begin <= piece * kSplitPageBytes);
    CHECK(c.begin % kSplitPageBytes == 0);
    if (front) {
      CHECK(c.begin == front_at);  // the receiver reads forward from the start
      front_at = c.end;
    } else {
      CHECK(c.end == back_at);  // the sender writes backward from the end
      back_at = c.begin;
      back_bytes += c.end - c.begin;
    }
    for (uint64_t i = c.begin; i < c.end; ++i) ++seen[i];
  }
  return back_bytes;
}

}  // namespace

TEST_CASE("split: every byte is claimed once, by the front or the back, and the receiver knows the sender's share",
          "[shm][split]") {
  for (uint64_t bytes : {uint64_t{1}, uint64_t{4095}, uint64_t{4096}, uint64_t{4097}, uint64_t{(64 << 10) + 5},
                         uint64_t{(3 << 20) + 7}, uint64_t{9} << 20}) {
    INFO(bytes << " bytes");
    for (bool helps : {true, false}) {
      std::vector<int> seen;
      const uint64_t back = claim_all(bytes, helps, seen);
      CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(bytes));
      if (!helps) CHECK(back == 0);
      if (helps && bytes > kSplitPageBytes) CHECK(back > 0);
    }
  }
  // split_sender_bytes reads the share off the board once the claims have met.
  SplitBoard b;
  const uint64_t bytes = (5 << 20) + 3;
  split_open(b, 3, bytes, 30);
  uint64_t back = 0;
  for (int i = 0; i < 3; ++i) {
    SplitClaim c = split_take(b, 3, bytes, split_piece(bytes), false);
    back += c.end - c.begin;
  }
  while (!split_take(b, 3, bytes, split_piece(bytes), true).empty()) {
  }
  CHECK(back == 3 * kSplitPiecePages * kSplitPageBytes - (kSplitPageBytes - 3));  // the last page is 3 bytes
  CHECK(split_sender_bytes(b, bytes) == back);
}

TEST_CASE("split: a piece is half the message up to kSplitPiecePages; a stale generation or a cancel claims nothing",
          "[shm][split]") {
  CHECK(split_piece(1) == 1);
  CHECK(split_piece(64 << 10) == 8);
  CHECK(split_piece((64 << 10) + 1) == 9);
  CHECK(split_piece(uint64_t{64} << 20) == kSplitPiecePages);
  SplitBoard b;
  split_open(b, 41, 1 << 20, 410);
  CHECK(split_take(b, 40, 1 << 20, 8, false).empty());  // the sender's kSplit of the message before
  CHECK_FALSE(split_take(b, 41, 1 << 20, 8, true).empty());
  split_cancel(b, 41);
  CHECK(split_take(b, 41, 1 << 20, 8, false).empty());
  CHECK(split_take(b, 41, 1 << 20, 8, true).empty());
  CHECK(split_sender_bytes(b, 1 << 20) == 0);  // nothing was taken from the back
  split_open(b, 42, 1 << 20, 420);             // the next message starts from scratch
  CHECK(b.done.load() == 0);
  CHECK(split_take(b, 42, 1 << 20, 8, false).end == (1 << 20));
  CHECK(split_claim_is_for(b, 420));
  // 65,536 split reads later the generation repeats: a claim under it for another message is refused by its msg_id.
  split_open(b, 42, 1 << 20, 65956);
  CHECK_FALSE(split_take(b, 42, 1 << 20, 8, false).empty());
  CHECK_FALSE(split_claim_is_for(b, 420));
}

TEST_CASE("split: each side's pieces land where they belong (this process as both sides)", "[shm][split]") {
  // Deterministic, where a transfer between ranks depends on the sender reaching the board in time.
  const int self = static_cast<int>(::getpid());
  for (uint64_t bytes : {uint64_t{(64 << 10) + 5}, uint64_t{(3 << 20) + 7}}) {
    INFO(bytes << " bytes");
    std::vector<char> src(bytes), dst(bytes, 0);
    for (uint64_t i = 0; i < bytes; ++i) src[i] = static_cast<char>(((i + 1) * 0x9E3779B97F4A7C15ull) >> 56);  // no period
    SplitBoard b;
    split_open(b, 9, bytes, 90);
    const auto remote_src = reinterpret_cast<uint64_t>(src.data());
    const auto remote_dst = reinterpret_cast<uint64_t>(dst.data());
    bool front = false, back = false;
    for (bool reading = true;; reading = !reading) {
      int err = -1;
      const SplitClaim c = reading ? split_read_piece(b, 9, bytes, self, dst.data(), remote_src, &err)
                                   : split_write_piece(b, 9, 90, bytes, self, src.data(), remote_dst, &err);
      if (c.empty()) break;
      REQUIRE(err == 0);
      (reading ? front : back) = true;
    }
    CHECK(front);
    CHECK(back);
    CHECK(std::equal(src.begin(), src.end(), dst.begin()));
    // A claim on another message's board is refused, and nothing is written.
    std::fill(dst.begin(), dst.end(), 0);
    split_open(b, 9, bytes, 91);
    int err = 0;
    const SplitClaim c = split_write_piece(b, 9, 90, bytes, self, src.data(), remote_dst, &err);
    CHECK_FALSE(c.empty());
    CHECK(err == ESTALE);
    CHECK(std::count(dst.begin(), dst.end(), 0) == static_cast<long>(bytes));
  }
}

TEST_CASE("split: two threads racing for the claims of many messages copy each byte exactly once", "[shm][split]") {
  SplitBoard b;
  std::mt19937_64 rng(12345);
  std::vector<uint64_t> sizes;
  for (int i = 0; i < 400; ++i) sizes.push_back(1 + rng() % (uint64_t{3} << 20));
  std::vector<std::atomic<uint8_t>> seen(uint64_t{3} << 20);
  std::atomic<int> open{-1};   // the message the board is set up for
  std::atomic<int> helped{0};  // messages the back took part of
  std::thread sender([&] {
    for (int m = 0; m < static_cast<int>(sizes.size()); ++m) {
      while (open.load() < m) std::this_thread::yield();
      bool took = false;
      for (SplitClaim c; !(c = split_take(b, static_cast<uint16_t>(m + 1), sizes[m], split_piece(sizes[m]), false)).empty();) {
        for (uint64_t i = c.begin; i < c.end; ++i) seen[i].fetch_add(1);
        b.done.fetch_add(c.end - c.begin);
        took = true;
      }
      helped += took;
    }
  });
  int wrong = 0;
  for (int m = 0; m < static_cast<int>(sizes.size()); ++m) {
    const uint64_t bytes = sizes[m];
    for (uint64_t i = 0; i < bytes; ++i) seen[i].store(0);
    split_open(b, static_cast<uint16_t>(m + 1), bytes, static_cast<uint64_t>(m));
    open.store(m);
    for (SplitClaim c; !(c = split_take(b, static_cast<uint16_t>(m + 1), bytes, split_piece(bytes), true)).empty();) {
      for (uint64_t i = c.begin; i < c.end; ++i) seen[i].fetch_add(1);
    }
    const uint64_t theirs = split_sender_bytes(b, bytes);
    while (b.done.load() < theirs) std::this_thread::yield();  // the sender's pieces are in
    for (uint64_t i = 0; i < bytes; ++i) wrong += seen[i].load() != 1;
  }
  sender.join();
  CHECK(wrong == 0);
  CHECK(helped > 0);  // the race went both ways at least once in 400 messages
}

TEST_CASE("split reads between ranks: right bytes with the sender helping, and without waiting for an absent one",
          "[shm][split]") {
  // Single copy forced (ranks are threads: a process may always read and write itself).
  ::setenv("DCOMM_SHM_PROTOCOL", "cma", 1);
  ::setenv("DCOMM_SHM_CMA", "1", 1);
  const std::vector<std::size_t> sizes{(std::size_t{16} << 10) + 1, (std::size_t{64} << 10) + 5,
                                       (std::size_t{3} << 20) + 3, (std::size_t{33} << 20) + 1};
  SECTION("the sender waits for its sends (it helps), both directions at once") {
    auto failures = dcomm::test::run_world("shm", 2, [&](dcomm::transport::Mesh& m, dcomm::test::RankLog& log) {
      const int peer = 1 - m.rank();
      for (std::size_t round = 0; round < 3; ++round) {
        for (std::size_t bytes : sizes) {
          auto out = dcomm::test::make_payload(m.rank(), peer, round, bytes);
          std::vector<uint8_t> in(bytes);
          auto r = m.irecv(peer, 2, in.data(), in.size());
          auto s = m.isend(peer, 2, out.data(), out.size());
          if (dcomm::test::wait_ok(m, *r, log, "recv")) {
            dcomm::test::check_payload(log, in, r->received, peer, m.rank(), round, bytes, "recv");
          }
          dcomm::test::wait_ok(m, *s, log, "send");
        }
      }
    });
    for (const auto& f : failures) UNSCOPED_INFO(f);
    CHECK(failures.empty());
  }
  SECTION("the sender is away: the receiver reads it all and does not wait for it") {
    constexpr auto kAway = std::chrono::milliseconds(800);
    std::atomic<bool> back{false};
    auto failures = dcomm::test::run_world("shm", 2, [&](dcomm::transport::Mesh& m, dcomm::test::RankLog& log) {
      if (m.rank() == 0) {
        std::vector<std::vector<uint8_t>> outs;
        std::vector<dcomm::transport::RequestPtr> sends;
        for (std::size_t bytes : sizes) {
          outs.push_back(dcomm::test::make_payload(0, 1, bytes, bytes));
          sends.push_back(m.isend(1, 4, outs.back().data(), bytes));
        }
        std::this_thread::sleep_for(kAway);
        back = true;
        for (auto& s : sends) dcomm::test::wait_ok(m, *s, log, "send");
        return;
      }
      for (std::size_t bytes : sizes) {
        std::vector<uint8_t> in(bytes);
        auto r = m.irecv(0, 4, in.data(), in.size());
        if (dcomm::test::wait_ok(m, *r, log, "recv")) {
          log.expect(!back, "a receive waited for the absent sender");
          dcomm::test::check_payload(log, in, r->received, 0, 1, bytes, bytes, "recv");
        }
      }
    });
    for (const auto& f : failures) UNSCOPED_INFO(f);
    CHECK(failures.empty());
  }
  ::unsetenv("DCOMM_SHM_PROTOCOL");
  ::unsetenv("DCOMM_SHM_CMA");
}
