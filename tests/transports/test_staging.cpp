// Staging device buffers over host-only transports (transports/staging), in one process: ranks are threads, over
// every transport that joins threads, with the fake stager (tests/transports/fake_stager.hpp) standing in for CUDA.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <dcomm/error.hpp>

#include "tests/transports/fake_stager.hpp"
#include "tests/transports/staging_cases.hpp"
#include "tests/transports/world.hpp"

using dcomm::test::FakeStager;
using dcomm::test::RankLog;
using dcomm::transport::Mesh;

namespace {

constexpr std::size_t kChunk = 1000;  // odd on purpose: chunks never line up with pages or vectors

void require_no_failures(const std::vector<std::string>& failures) {
  for (const auto& f : failures) UNSCOPED_INFO(f);
  CHECK(failures.empty());
}

}  // namespace

TEST_CASE("device buffers cross every in-process host transport through staging", "[staging]") {
  for (const auto& name : dcomm::test::in_process_transports()) {
    for (int world : {2, 3}) {
      for (int depth : {1, 3}) {
        INFO("transport " << name << ", " << world << " ranks, depth " << depth);
        auto stager = std::make_shared<FakeStager>(kChunk, depth, /*lag=*/2);
        dcomm::test::FakeDeviceAccess dev;
        require_no_failures(dcomm::test::run_world(
            name, world, [&](Mesh& m, RankLog& log) { dcomm::test::run_staging_cases(m, log, dev, kChunk); },
            [&](dcomm::transport::MeshOptions& o) { o.stager = stager; }));
        CHECK(stager->copies() > 0);
        CHECK(stager->live_slots() == 0);  // every slot went back, the ones of finished messages and at close
      }
    }
  }
}

TEST_CASE("a failed device copy fails the staged send with an error naming the peer and the copy", "[staging]") {
  auto stager = std::make_shared<FakeStager>(kChunk, 2, /*lag=*/1, /*fail_copy=*/2);
  std::string error;
  dcomm::ErrorCode code = dcomm::ErrorCode::kInternal;
  auto failures = dcomm::test::run_world(
      "loopback", 2,
      [&](Mesh& m, RankLog& log) {
        if (m.rank() != 0) return;  // rank 1 never receives: the sender fails on its own copy
        std::vector<char> src(5 * kChunk, 'x');
        auto s = m.isend(1, 5, src.data(), src.size(), dcomm::Device::cuda(0));
        try {
          m.wait(*s, dcomm::Deadline::after(std::chrono::seconds(60)), "staged send");
          log.failures.push_back("the send succeeded although its third copy failed");
        } catch (const dcomm::Error& e) {
          error = e.what();
          code = e.code();
        }
      },
      [&](dcomm::transport::MeshOptions& o) { o.stager = stager; });
  require_no_failures(failures);
  INFO(error);
  CHECK(code == dcomm::ErrorCode::kCudaError);
  CHECK(error.find("staged send of 4.9 KiB from cuda:0 to rank 1 over loopback (chunk 3 of 5)") != std::string::npos);
  CHECK(error.find("fake device copy failed") != std::string::npos);
  CHECK(stager->live_slots() == 0);
}
