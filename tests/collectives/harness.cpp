#include "tests/collectives/harness.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <dcomm/error.hpp>
#include <dcomm/store.hpp>
#include <thread>

#include "collectives/cost_model.hpp"
#include "collectives/topology.hpp"

namespace dcomm::test {

coll::GroupView with_topology(const coll::GroupView& node, const std::function<void(coll::Topology&)>& change) {
  auto h = std::make_shared<coll::Hierarchy>(node.hierarchy ? *node.hierarchy : *coll::build_hierarchy(node));
  change(h->topo);
  coll::GroupView v = node;
  v.hierarchy = std::move(h);
  return v;
}

std::vector<RankRecord> run_group(int size, const GroupBody& body, const std::string& transport,
                                  const std::vector<int>& nodes) {
  std::vector<std::string> hosts;
  for (int n : nodes) hosts.push_back(fmt::format("test-node-{}", n));
  auto store = make_memory_store(std::chrono::seconds(60));
  std::vector<RankRecord> records(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      RankRecord& rec = records[static_cast<std::size_t>(r)];
      try {
        transport::PeerInfo self{r, r, 0, "test-host", "localhost", static_cast<int>(::getpid())};
        transport::MeshOptions opts;
        opts.forced_transport = transport;
        opts.timeout = std::chrono::seconds(60);
        coll::GroupView view;
        view.mesh = transport::Mesh::create(store, self, size, opts);
        view.rank = r;
        view.size = size;
        for (int i = 0; i < size; ++i) view.world_ranks.push_back(i);
        view.context = 1;
        if (!hosts.empty()) view.hierarchy = coll::build_hierarchy(view, hosts);
        body(view, rec);
        view.mesh->close();
      } catch (const std::exception& e) {
        rec.failures.push_back(fmt::format("threw: {}", e.what()));
      }
    });
  }
  for (auto& t : threads) t.join();
  return records;
}

std::vector<std::string> summarize(const std::vector<RankRecord>& records) {
  std::vector<std::string> out;
  for (std::size_t r = 0; r < records.size(); ++r) {
    for (const auto& f : records[r].failures) out.push_back(fmt::format("rank {}: {}", r, f));
    if (records[r].digests != records[0].digests) {
      out.push_back(fmt::format("rank {}: results differ in bits from rank 0's", r));
    }
  }
  return out;
}

uint64_t digest(const void* data, std::size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

ScopedEnv::ScopedEnv(const char* name, const char* value) : name_(name) {
  const char* old = std::getenv(name);
  had_ = old != nullptr;
  if (had_) old_ = old;
  if (value != nullptr) {
    ::setenv(name, value, 1);
  } else {
    ::unsetenv(name);
  }
}

ScopedEnv::~ScopedEnv() {
  if (had_) {
    ::setenv(name_.c_str(), old_.c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
}

std::string invalid_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidUsageError& e) {
    return e.what();
  }
  return "(no InvalidUsageError)";
}

coll::CostParams one_node_params() {
  coll::CostParams p;
  p.alpha = p.alpha_intra = coll::kOneNodeAlpha;
  p.beta = p.beta_intra = coll::kOneNodeBeta;
  p.gamma = coll::kOneNodeGamma;
  return p;
}

coll::GroupView fake_view(int rank, int size) {
  coll::GroupView v;
  v.rank = rank;
  v.size = size;
  return v;
}

coll::GroupView placed_view(const std::vector<std::string>& hosts) {
  coll::GroupView v = fake_view(0, static_cast<int>(hosts.size()));
  v.hierarchy = coll::build_hierarchy(v, hosts);
  return v;
}

}  // namespace dcomm::test
