// The conformance suite in one process: ranks are threads, over every transport that can join threads
// (loopback, shm, ucx), for worlds of 1 to 4 ranks.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <thread>

#include <unistd.h>

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>

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
        log.expect(text.find("closed peer: recv from rank 1 (tag 5)") != std::string::npos, "error text: " + text);
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
      m.irecv(0, dcomm::transport::kMaxMeshTag + 1, nullptr, 0);
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

TEST_CASE("several threads drive one rank's mesh at once", "[transport]") {
  for (const auto& name : dcomm::test::in_process_transports()) {
    INFO("transport " << name);
    auto failures = dcomm::test::run_world(name, 2, [](Mesh& m, RankLog& log) {
      constexpr int kThreads = 3, kMessages = 50;
      std::vector<RankLog> logs(kThreads);
      std::vector<std::thread> threads;
      int other = 1 - m.rank();
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          for (int i = 0; i < kMessages; ++i) {
            std::size_t bytes = static_cast<std::size_t>(1 + (i * 611 + t * 97) % 40000);
            auto out = dcomm::test::make_payload(m.rank(), other, static_cast<uint64_t>(t * 1000 + i), bytes);
            std::vector<uint8_t> in(bytes);
            auto tag = static_cast<uint64_t>(20 + t);
            auto r = m.irecv(other, tag, in.data(), bytes);
            auto s = m.isend(other, tag, out.data(), bytes);
            dcomm::test::wait_ok(m, *s, logs[t], "threaded send");
            if (dcomm::test::wait_ok(m, *r, logs[t], "threaded recv")) {
              dcomm::test::check_payload(logs[t], in, r->received, other, m.rank(),
                                         static_cast<uint64_t>(t * 1000 + i), bytes, "threaded");
            }
          }
        });
      }
      for (auto& th : threads) th.join();
      for (auto& l : logs) log.failures.insert(log.failures.end(), l.failures.begin(), l.failures.end());
    });
    require_no_failures(failures);
  }
}

TEST_CASE("mesh setup names the ranks that never joined and leaves no shared memory behind", "[transport]") {
  for (const auto& name : dcomm::test::in_process_transports()) {
    INFO("transport " << name);
    auto store = dcomm::make_memory_store(std::chrono::seconds(5));
    std::vector<std::string> errors(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {  // a world of 3 in which rank 2 never starts
      threads.emplace_back([&, r] {
        dcomm::transport::PeerInfo self{r, r, 0, "test-host", "localhost", static_cast<int>(::getpid())};
        dcomm::transport::MeshOptions opts;
        opts.forced_transport = name;
        opts.timeout = std::chrono::milliseconds(500);
        try {
          dcomm::transport::Mesh::create(store, self, 3, opts);
          errors[static_cast<std::size_t>(r)] = "no error";
        } catch (const dcomm::TimeoutError& e) {
          errors[static_cast<std::size_t>(r)] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& e : errors) {
      CHECK_THAT(e, Catch::Contains("rank(s) 2 did not publish their peer info") && Catch::Contains("timeout 500 ms"));
    }
    std::string world_id = store->get_string("mesh/0/world_id");
    for (int r = 0; r < 3; ++r) {
      std::string path = "/dev/shm/dcomm-" + world_id + "-" + std::to_string(r);
      CHECK(::access(path.c_str(), F_OK) != 0);
    }
  }
}

TEST_CASE("shm segments are unlinked once every peer has mapped them", "[transport]") {
  auto store = dcomm::make_memory_store(std::chrono::seconds(30));
  std::vector<int> visible(2, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      dcomm::transport::PeerInfo self{r, r, 0, "test-host", "localhost", static_cast<int>(::getpid())};
      dcomm::transport::MeshOptions opts;
      opts.forced_transport = "shm";
      auto mesh = dcomm::transport::Mesh::create(store, self, 2, opts);
      std::string path = "/dev/shm/dcomm-" + store->get_string("mesh/0/world_id") + "-" + std::to_string(r);
      visible[static_cast<std::size_t>(r)] = ::access(path.c_str(), F_OK) == 0 ? 1 : 0;
      mesh->close();
    });
  }
  for (auto& t : threads) t.join();
  CHECK(visible == std::vector<int>{0, 0});
}
