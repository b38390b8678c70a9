// The ucx transport on its own: ranks are threads of this process, each with its own UCP worker, driven through
// the Transport interface with a small ArrivalSink (tests/ucx/ucx_world.hpp).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <map>

#include "tests/ucx/ucx_world.hpp"

using namespace dcomm;
using dcomm::test::check_pattern;
using dcomm::test::join;
using dcomm::test::pattern;
using dcomm::test::run_ucx_world;
using dcomm::test::UcxRank;

TEST_CASE("ucx ping-pong carries every size, 0 bytes and odd sizes included", "[ucx]") {
  const std::vector<std::size_t> sizes = {0, 1, 7, 8, 4093, 65537, (1u << 20) + 3};
  auto failures = run_ucx_world(2, [&](UcxRank& r) {
    const int other = 1 - r.rank();
    for (std::size_t round = 0; round < 3 * sizes.size(); ++round) {
      const std::size_t bytes = sizes[round % sizes.size()];
      const bool my_turn = (round % 2 == 0) == (r.rank() == 0);
      if (my_turn) {
        auto data = pattern(r.rank(), round, bytes);
        r.wait(r.send(other, 100 + round, data.data(), bytes));
      } else {
        auto msg = r.next();
        if (msg.source != other || msg.tag != 100 + round || msg.bytes != bytes) {
          r.fail(fmt::format("round {}: got source {} tag {} bytes {}", round, msg.source, msg.tag, msg.bytes));
          return;
        }
        std::vector<uint8_t> got(bytes + 1, 0xEE);  // one guard byte past the end
        r.receive(msg, got.data());
        if (auto e = check_pattern(got.data(), bytes, other, round); !e.empty()) r.fail(e);
        if (got[bytes] != 0xEE) r.fail(fmt::format("round {}: wrote past {} bytes", round, bytes));
      }
    }
  });
  INFO(join(failures));
  CHECK(failures.empty());
}

// Three ranks each send hundreds of messages to each other before receiving any: sizes mix eager and rendezvous
// sizes, and tags repeat, so per-(source, tag) order is tested across UCX's protocols.
TEST_CASE("ucx keeps per-(source, tag) order with hundreds of messages in flight", "[ucx]") {
  constexpr int kWorld = 3;
  constexpr int kPerPeer = 300;
  constexpr uint64_t kTags = 5;
  // Mostly single-fragment eager sizes, with multi-fragment eager and rendezvous sizes in between.
  auto size_of = [](int i) -> std::size_t {
    if (i % 37 == 5) return 200000 + i;
    if (i % 11 == 3) return 20000 + i;
    return static_cast<std::size_t>(i * 13 % 301);
  };
  auto failures = run_ucx_world(kWorld, [&](UcxRank& r) {
    std::vector<std::vector<uint8_t>> out;
    std::vector<transport::OpPtr> ops;
    for (int i = 0; i < kPerPeer; ++i) {
      for (int p = 0; p < kWorld; ++p) {
        if (p == r.rank()) continue;
        out.push_back(pattern(r.rank(), static_cast<uint64_t>(i) * 16 + p, size_of(i)));
        ops.push_back(r.send(p, static_cast<uint64_t>(i) % kTags, out.back().data(), out.back().size()));
      }
    }
    std::map<std::pair<int, uint64_t>, int> next_index;  // (source, tag) -> the index expected next
    for (int n = 0; n < kPerPeer * (kWorld - 1); ++n) {
      auto msg = r.next();
      // Message i carries tag i % kTags, so a (source, tag) stream runs tag, tag + kTags, ...
      int& expect = next_index.try_emplace({msg.source, msg.tag}, static_cast<int>(msg.tag)).first->second;
      std::vector<uint8_t> got(msg.bytes);
      r.receive(msg, got.data());
      if (msg.bytes != size_of(expect)) {
        r.fail(fmt::format("from rank {} tag {}: expected message {} ({} B) but got {} B", msg.source, msg.tag, expect,
                           size_of(expect), msg.bytes));
        return;
      }
      if (auto e = check_pattern(got.data(), got.size(), msg.source, static_cast<uint64_t>(expect) * 16 + r.rank());
          !e.empty()) {
        r.fail(fmt::format("tag {}: {}", msg.tag, e));
        return;
      }
      expect += static_cast<int>(kTags);
    }
    for (auto& op : ops) r.wait(op);
  });
  INFO(join(failures));
  CHECK(failures.empty());
}

TEST_CASE("ucx moves 64 MiB and 256 MiB messages intact", "[ucx][large]") {
  const std::vector<std::size_t> sizes = {(64u << 20) + 5, 256u << 20};
  auto failures = run_ucx_world(2, [&](UcxRank& r) {
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      if (r.rank() == 0) {
        auto data = pattern(0, k, sizes[k]);
        r.wait(r.send(1, 7, data.data(), data.size()));
      } else {
        auto msg = r.next();
        if (msg.bytes != sizes[k]) r.fail(fmt::format("announced {} B, sent {} B", msg.bytes, sizes[k]));
        std::vector<uint8_t> got(msg.bytes);
        r.receive(msg, got.data());
        if (auto e = check_pattern(got.data(), got.size(), 0, k); !e.empty()) r.fail(e);
      }
    }
  });
  INFO(join(failures));
  CHECK(failures.empty());
}
