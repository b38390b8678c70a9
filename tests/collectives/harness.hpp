#pragma once
// Threads as ranks over the loopback transport, for the collectives tests. Rank threads record failures and
// result digests; only the main thread asserts (Catch2 is not thread-safe).

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "collectives/engine.hpp"
#include "collectives/registry.hpp"
#include "collectives/topology.hpp"

namespace dcomm::test {

/// What one rank thread reports.
struct RankRecord {
  std::vector<std::string> failures;
  /// Digests of results that must be bit-identical on every rank, in call order.
  std::vector<uint64_t> digests;
};

using GroupBody = std::function<void(const coll::GroupView& view, RankRecord& rec)>;

/// Runs `body` on `size` rank threads, each with a view of a fresh world (context 1) over `transport`
/// ("loopback" or "shm"). `nodes`, when given, places rank r on simulated node nodes[r]: the view's topology
/// (GroupView::hierarchy) sees host "test-node-<n>", while the mesh keeps one host id, because its in-process
/// transports connect only ranks of one host.
std::vector<RankRecord> run_group(int size, const GroupBody& body, const std::string& transport = "loopback",
                                  const std::vector<int>& nodes = {});

/// Every failure as "rank r: ...", plus one line per rank whose digests differ from rank 0's.
std::vector<std::string> summarize(const std::vector<RankRecord>& records);

/// The cost model's built-in one-node α, β, γ (both link classes), which a probe on one node settles on: for
/// tests of one-node choices that a loaded machine's probe must not skew.
coll::CostParams one_node_params();

/// FNV-1a over bytes.
uint64_t digest(const void* data, std::size_t bytes);

/// A call's deadline in the tests: long enough for a loaded machine, short enough to end a hung test.
inline Deadline soon() { return Deadline::after(std::chrono::seconds(60)); }

/// The message of the InvalidUsageError that `f` throws, or "(no InvalidUsageError)".
std::string invalid_message(const std::function<void()>& f);

/// A view of rank `rank` of `size` with no mesh: for validation and pricing only.
coll::GroupView fake_view(int rank, int size);
/// Rank 0 of a group of hosts.size() ranks on those hosts (one host id a rank), with no mesh: for pricing only.
coll::GroupView placed_view(const std::vector<std::string>& hosts);

/// Sets an environment variable for the scope (tests of DCOMM_* knobs), restoring it afterwards.
/// `node` with a copy of its topology (built as the engine builds it where the view has none) that `change` edits:
/// a placement or a window probe's answer set by the test.
coll::GroupView with_topology(const coll::GroupView& node, const std::function<void(coll::Topology&)>& change);

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::string old_;
  bool had_;
};

}  // namespace dcomm::test
