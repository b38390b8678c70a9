// Dropping messages (discard, and a sink that rejects messages larger than the posted buffer), caller mistakes,
// and close() with operations still in flight.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <sys/mman.h>

#include <dcomm/error.hpp>

#include "tests/ucx/ucx_world.hpp"
#include "transports/registry.hpp"

using namespace dcomm;
using dcomm::test::check_pattern;
using dcomm::test::join;
using dcomm::test::pattern;
using dcomm::test::run_ucx_world;
using dcomm::test::UcxRank;

namespace {

// Rank 0 sends one message per size with tags 1, 2, ...; rank 1 drops every size marked in `drop` and receives
// the others. All of rank 0's sends must complete, and the kept ones must arrive intact.
std::vector<std::string> send_and_drop(const std::vector<std::size_t>& sizes, const std::vector<bool>& drop) {
  return run_ucx_world(2, [&](UcxRank& r) {
    if (r.rank() == 0) {
      std::vector<std::vector<uint8_t>> data;
      std::vector<transport::OpPtr> ops;
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        data.push_back(pattern(0, k, sizes[k]));
        ops.push_back(r.send(1, k + 1, data.back().data(), sizes[k]));
      }
      for (auto& op : ops) r.wait(op);
      return;
    }
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      auto msg = r.next();
      if (msg.tag != k + 1 || msg.bytes != sizes[k]) {
        r.fail(fmt::format("message {}: tag {} and {} B", k, msg.tag, msg.bytes));
        return;
      }
      if (drop[k]) {
        r.transport().discard(msg);
        continue;
      }
      std::vector<uint8_t> got(msg.bytes);
      r.receive(msg, got.data());
      if (auto e = check_pattern(got.data(), got.size(), 0, k); !e.empty()) r.fail(e);
    }
  });
}

}  // namespace

TEST_CASE("ucx discard drops eager and rendezvous messages and the stream goes on", "[ucx]") {
  const std::vector<std::size_t> sizes = {1024, (64u << 20) + 1, 1023, 0, 300000, 17};
  const std::vector<bool> drop = {true, true, false, true, true, false};
  auto failures = send_and_drop(sizes, drop);
  INFO(join(failures));
  CHECK(failures.empty());
}

// What Mesh does when a message is larger than the receive posted for it: the sink compares the announced size
// with the room it has, discards the message, and reports the mistake; later messages are unaffected.
TEST_CASE("ucx: a sink rejects messages larger than the posted buffer, the sender still completes", "[ucx]") {
  constexpr std::size_t kRoom = 4096;
  const std::vector<std::size_t> sizes = {kRoom + 1, 3u << 20, kRoom, 1, kRoom * 2};
  std::vector<bool> too_big;
  for (auto s : sizes) too_big.push_back(s > kRoom);
  auto failures = send_and_drop(sizes, too_big);
  INFO(join(failures));
  CHECK(failures.empty());
}

TEST_CASE("ucx rejects caller mistakes before any I/O", "[ucx]") {
  transport::TransportContext ctx;
  ctx.self.rank = 0;
  ctx.world_size = 2;
  auto t = transport::make_ucx_transport(ctx);
  uint8_t byte = 1;
  auto op = std::make_shared<transport::Op>();
  CHECK_THROWS_AS(t->isend(1, 5, &byte, 1, Device::host(), op), InvalidUsageError);  // never connected
  CHECK_THROWS_AS(t->isend(0, 5, &byte, 1, Device::host(), op), InvalidUsageError);  // itself
  CHECK(t->peer_failure(1).empty());
  CHECK(std::string(t->name()) == "ucx");
  t->close();
  t->close();  // idempotent
  CHECK_THROWS_AS(t->isend(1, 5, &byte, 1, Device::host(), op), InvalidUsageError);
  CHECK(op->state() == transport::Op::State::kPending);
}

TEST_CASE("ucx close() fails sends still in flight and returns promptly", "[ucx]") {
  auto failures = run_ucx_world(2, [&](UcxRank& r) {
    if (r.rank() == 1) {
      r.next();  // announced and never received: the sender's rendezvous send stays pending
      return;
    }
    auto data = pattern(0, 0, 8u << 20);
    auto op = r.send(1, 3, data.data(), data.size());
    uint8_t small = 9;
    auto bad_tag = std::make_shared<transport::Op>();
    try {
      r.transport().isend(1, transport::kMaxTag + 1, &small, 1, Device::host(), bad_tag);
      r.fail("a tag beyond 44 bits was accepted");
    } catch (const InvalidUsageError&) {
    }
    for (int i = 0; i < 100; ++i) r.progress();
    Deadline d = Deadline::after(std::chrono::seconds(30));
    r.transport().close();
    if (d.elapsed() > std::chrono::seconds(10)) r.fail("close() took " + format_duration(d.elapsed()));
    if (op->state() != transport::Op::State::kFailed) {
      r.fail("the pending send did not fail at close");
      return;
    }
    try {
      std::rethrow_exception(op->error());
    } catch (const AbortedError& e) {
      if (std::string(e.what()).find("rank 1") == std::string::npos) r.fail(std::string("unnamed peer: ") + e.what());
    } catch (const std::exception& e) {
      r.fail(std::string("expected AbortedError, got: ") + e.what());
    }
  });
  INFO(join(failures));
  CHECK(failures.empty());
}

// Past 32 bits: a 4 GiB + 5 message is announced with its exact size and dropped without a receive buffer. The
// send buffer is an untouched read-only mapping (the kernel's zero page), so the test costs little memory.
TEST_CASE("ucx announces and drops a message larger than 4 GiB", "[ucx][large]") {
  constexpr std::size_t kHuge = (std::size_t{4} << 30) + 5;
  void* zeros = ::mmap(nullptr, kHuge, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(zeros != MAP_FAILED);
  auto failures = run_ucx_world(2, [&](UcxRank& r) {
    if (r.rank() == 0) {
      auto op = r.send(1, 9, zeros, kHuge);
      r.wait(op, std::chrono::seconds(300));
      if (op->bytes() != kHuge) r.fail(fmt::format("the send completed with {} bytes", op->bytes()));
      return;
    }
    auto msg = r.next(std::chrono::seconds(300));
    if (msg.bytes != kHuge || msg.tag != 9) r.fail(fmt::format("announced {} B with tag {}", msg.bytes, msg.tag));
    r.transport().discard(msg);
  });
  ::munmap(zeros, kHuge);
  INFO(join(failures));
  CHECK(failures.empty());
}
