#pragma once
// The transport conformance suite: test bodies that every rank of a world runs over a Mesh, written once and
// run against every transport built, in threads (test_transports.cpp) and in processes (mp_transports.cpp).
// Rank bodies never assert; they record failures in a RankLog that the main thread (or the process) checks.

#include <cstdint>
#include <string>
#include <vector>

#include "transports/mesh.hpp"

namespace dcomm::test {

struct RankLog {
  std::vector<std::string> failures;
  void expect(bool ok, const std::string& what) {
    if (!ok) failures.push_back(what);
  }
};

using CaseBody = void (*)(transport::Mesh& mesh, RankLog& log);

struct ConformanceCase {
  const char* name;
  CaseBody body;
  int min_world;  ///< the case needs this many ranks (smaller worlds skip it)
};

/// The cases that leave the mesh healthy, in the order every rank runs them.
const std::vector<ConformanceCase>& conformance_cases();
/// Runs every case of conformance_cases() that fits the world, then a barrier; failures carry the case name.
void run_conformance(transport::Mesh& mesh, RankLog& log);

/// 256 MiB from rank 0 to rank 1 (other ranks do nothing).
void case_big_message(transport::Mesh& mesh, RankLog& log);
/// A wait that times out poisons the mesh: later calls throw the same error at once.
void case_poison_after_timeout(transport::Mesh& mesh, RankLog& log);

// Helpers shared by the cases and the drivers.
/// The byte at `index` of message `salt` from `src` to `dst`: differs per rank, index and message.
inline uint8_t pattern(int src, int dst, uint64_t salt, std::size_t index) {
  uint64_t x = (index + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t(src + 1) << 40) ^ (uint64_t(dst + 1) << 48) ^
               (salt * 0xBF58476D1CE4E5B9ull);
  x ^= x >> 31;
  return static_cast<uint8_t>(x * 0x94D049BB133111EBull >> 56);
}
std::vector<uint8_t> make_payload(int src, int dst, uint64_t salt, std::size_t bytes);
/// The index of the first byte that differs from the pattern, or -1.
long long first_mismatch(const uint8_t* data, int src, int dst, uint64_t salt, std::size_t bytes);
/// Records a failure when `got` differs from `want` or the bytes differ from the pattern.
void check_payload(RankLog& log, const std::vector<uint8_t>& buf, std::size_t got, int src, int dst, uint64_t salt,
                   std::size_t want, const std::string& what);
/// Waits, recording (not throwing) a failure; returns whether the request finished well.
bool wait_ok(transport::Mesh& mesh, transport::Request& r, RankLog& log, const std::string& what);
/// Every rank sends an empty message to every other and waits for all of theirs.
void barrier(transport::Mesh& mesh, uint64_t tag, RankLog& log);

}  // namespace dcomm::test
