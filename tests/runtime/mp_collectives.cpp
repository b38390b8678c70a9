// The collectives matrix in real processes: every algorithm of the table, a handful of dtypes, ops and counts
// (0, 1, odd, not divisible by the world size, larger than a chunk), in place and out of place, over whatever
// transport the launcher's environment picks (DCOMM_TRANSPORT=shm or ucx in the tests). Each rank checks its
// results against the serial reference; the ranks then compare digests of their shared results through the
// store, so a result that differs in bits between ranks fails too. Exit 0 only when every rank agrees.
//   dcomm-run --nproc-per-node 3 -- mp_collectives

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <numeric>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/cost_model.hpp"
#include "collectives/registry.hpp"
#include "collectives/validate.hpp"
#include "rendezvous/bootstrap.hpp"
#include "tests/collectives/cases.hpp"
#include "transports/peer_table.hpp"

using namespace dcomm;
using namespace dcomm::coll;

namespace {

std::vector<test::Case> cases_for(const Algorithm& algo, int size) {
  std::vector<test::Case> out;
  if (algo.collective == Collective::kBarrier) return {test::Case{}};
  bool reducing = is_reducing(algo.collective);
  auto p = static_cast<std::size_t>(size);
  uint64_t salt = 1;
  std::pair<DType, Reduction> kinds[] = {{DType::kFloat32, ReduceOp::kSum},
                                         {DType::kInt32, ReduceOp::kMax},
                                         {DType::kBFloat16, ReduceOp::kSum},
                                         {DType::kFloat64, ReduceOp::kAvg}};
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, 3 * p + 1, std::size_t{4099}}) {
    for (auto& [t, red] : kinds) {
      if (!reducing && red.op != ReduceOp::kSum) continue;
      test::Case c;
      c.dtype = t;
      c.red = red;
      c.count = count;
      c.in_place = (salt % 2) == 0;
      c.root = static_cast<int>(salt % p);
      c.salt = salt++;
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

int main() {
  try {
    rdzv::Bootstrap boot = rdzv::bootstrap({});
    const Identity& id = boot.identity;
    transport::PeerInfo self = transport::local_peer_info(id.rank, id.local_rank, id.node_rank, id.host_id);
    transport::MeshOptions mopts;
    mopts.timeout = boot.timeout;
    GroupView view;
    view.mesh = transport::Mesh::create(make_prefix_store("mesh/", boot.store), self, id.world_size, mopts);
    view.rank = id.rank;
    view.size = id.world_size;
    view.world_ranks.resize(static_cast<std::size_t>(id.world_size));
    std::iota(view.world_ranks.begin(), view.world_ranks.end(), 0);
    EngineOptions eopts;
    eopts.chunk_bytes = 1024;  // small, so 4099 elements cross several chunks
    auto engine = Engine::create(view, eopts);
    test::RankRecord rec;
    test::RankState s{*engine, view, rec};
    int ran = 0;
    int hierarchical = 0;  // the hier rows run only where the world spans nodes (tests/launcher/two_nodes_hier.py)
    for (const Algorithm& algo : algorithm_table()) {
      // Rows that refuse this world skip it: the hierarchical ones on one node, shm_direct across nodes.
      const bool hier = algo.supports == &supports_hier;
      if (!algo.supports(sample_args(algo.collective, 64, view.size), view)) continue;
      for (const test::Case& c : cases_for(algo, view.size)) {
        test::run_case(s, algo, c);
        ++ran;
        hierarchical += hier ? 1 : 0;
      }
    }
    uint64_t mine = test::digest(rec.digests.data(), rec.digests.size() * sizeof(uint64_t));
    boot.store->set(fmt::format("digest/{}", id.rank), std::to_string(mine));
    for (int r = 0; r < id.world_size; ++r) {
      std::string theirs = boot.store->get_string(fmt::format("digest/{}", r));
      if (theirs != std::to_string(mine)) rec.failures.push_back(fmt::format("results differ in bits from rank {}", r));
    }
    boot.store->add("done", 1);
    boot.store->wait({"done"});
    while (boot.store->add("done", 0) < id.world_size) usleep(1000);
    std::printf("rank %d/%d over %s: %d calls (%d hierarchical), %zu failures\n", id.rank, id.world_size,
                view.mesh->transport_name((id.rank + 1) % id.world_size), ran, hierarchical, rec.failures.size());
    for (std::size_t i = 0; i < rec.failures.size() && i < 10; ++i) std::printf("  %s\n", rec.failures[i].c_str());
    view.mesh->close();
    return rec.failures.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mp_collectives: %s\n", e.what());
    return 2;
  }
}
