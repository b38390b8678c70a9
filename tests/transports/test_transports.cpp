// The conformance suite in one process: ranks are threads, over every transport that can join threads
// (loopback, shm), for worlds of 1 to 4 ranks.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <thread>

#include <dcomm/error.hpp>

#include "tests/transports/world.hpp"

using dcomm::test::RankLog;
using dcomm::transport::Mesh;

namespace {

void require_no_failures(const std::vector<std::string>& failures) {
  for (const auto& f : failures) UNSCOPED_INFO(f);
  CHECK(failures.empty());
}

}  // namespace

TEST_CASE("every in-process transport passes the conformance suite", "[transport]") {
  for (const auto& name : dcomm::test::in_process_transports()) {
    for (int world : {1, 2, 3, 4}) {
      INFO("transport " << name << ", " << world << " ranks");
      require_no_failures(dcomm::test::run_world(name, world, &dcomm::test::run_conformance));
    }
  }
}

TEST_CASE("a 256 MiB message arrives intact over every in-process transport", "[transport][big]") {
  for (const auto& name : dcomm::test::in_process_transports()) {
    INFO("transport " << name);
    require_no_failures(dcomm::test::run_world(name, 2, &dcomm::test::case_big_message));
  }
}

TEST_CASE("a timed-out wait poisons the mesh", "[transport]") {
  for (const auto& name : dcomm::test::in_process_transports()) {
    INFO("transport " << name);
    require_no_failures(dcomm::test::run_world(name, 2, &dcomm::test::case_poison_after_timeout));
  }
}

TEST_CASE("a peer that closes fails its peers' waits naming it", "[transport]") {
  for (const auto& name : dcomm::test::in_process_transports()) {
    INFO("transport " << name);
    auto failures = dcomm::test::run_world(name, 2, [](Mesh& m, RankLog& log) {
      if (m.rank() == 1) {
        m.close();
        return;
      }
      std::vector<uint8_t> in(1 << 20);
      auto r = m.irecv(1, 5, in.data(), in.size());
      auto start = std::chrono::steady_clock::now();
      try {
        m.wait(*r, dcomm::Deadline::after(std::chrono::seconds(120)), "closed peer");
        log.failures.push_back("a receive from a closed peer completed");
      } catch (const dcomm::RemoteError& e) {
        std::string text = e.what();
        log.expect(text.find("closed peer: recv from rank 1 tag 5") != std::string::npos, "error text: " + text);
        log.expect(text.find("rank 1 is gone") != std::string::npos, "error text: " + text);
      } catch (const std::exception& e) {
        log.failures.push_back(std::string("wrong error: ") + e.what());
      }
      // Generous: the liveness check runs every 50 ms here; the op timeout is 120 s.
      log.expect(std::chrono::steady_clock::now() - start < std::chrono::seconds(30), "took too long to notice");
      try {
        m.irecv(1, 6, in.data(), in.size());
        log.failures.push_back("irecv on a poisoned mesh did not throw");
      } catch (const dcomm::RemoteError&) {
      }
    });
    require_no_failures(failures);
  }
}

TEST_CASE("mesh setup rejects bad arguments and unknown transports before any I/O", "[transport]") {
  auto failures = dcomm::test::run_world("no-such-transport", 1, [](Mesh&, RankLog&) {});
  REQUIRE(failures.size() == 1);
  CHECK_THAT(failures[0], Catch::Contains("transport 'no-such-transport'") && Catch::Contains("built: "));
  failures = dcomm::test::run_world("loopback", 2, [](Mesh& m, RankLog& log) {
    int n = 0;
    try {
      m.isend(5, 1, nullptr, 0);
    } catch (const dcomm::InvalidUsageError&) {
      ++n;
    }
    try {
      m.irecv(0, dcomm::transport::kMaxTag + 1, nullptr, 0);
    } catch (const dcomm::InvalidUsageError&) {
      ++n;
    }
    try {
      m.isend(0, 1, nullptr, 4);
    } catch (const dcomm::InvalidUsageError&) {
      ++n;
    }
    log.expect(n == 3, "bad arguments were not all rejected");
    log.expect(!m.poisoned(), "a rejected call poisoned the mesh");
  });
  require_no_failures(failures);
}
