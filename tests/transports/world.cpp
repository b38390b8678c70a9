#include "tests/transports/world.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <barrier>
#include <thread>

#include "transports/registry.hpp"

namespace dcomm::test {

std::vector<std::string> in_process_transports() {
  std::vector<std::string> out;
  for (const auto& e : transport::transport_table()) {
    std::string n = e.name;
    if (n == "loopback" || n == "shm" || n == "ucx") out.push_back(n);  // ucx: one UCP worker per thread
  }
  return out;
}

std::vector<std::string> run_world(const std::string& transport, int world_size, const RankBody& body,
                                   const MeshTweak& tweak) {
  auto store = make_memory_store(std::chrono::seconds(60));
  std::vector<RankLog> logs(static_cast<std::size_t>(world_size));
  std::vector<std::thread> threads;
  // Ranks close their meshes only once every body has finished: a rank that closes early would look like a
  // failed peer to the ones still running (a closed shm or loopback peer is reported as gone).
  std::barrier<> finished(world_size);
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      RankLog& log = logs[static_cast<std::size_t>(r)];
      std::shared_ptr<transport::Mesh> mesh;
      try {
        transport::PeerInfo self{r, r, 0, "test-host", "localhost", static_cast<int>(::getpid())};
        transport::MeshOptions opts;
        opts.forced_transport = transport;
        opts.timeout = std::chrono::seconds(60);
        opts.liveness_interval = std::chrono::milliseconds(50);
        if (tweak) tweak(opts);
        mesh = transport::Mesh::create(store, self, world_size, opts);
        body(*mesh, log);
      } catch (const std::exception& e) {
        log.failures.push_back(fmt::format("threw: {}", e.what()));
      }
      finished.arrive_and_wait();
      if (mesh) mesh->close();
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::string> failures;
  for (int r = 0; r < world_size; ++r) {
    for (auto& f : logs[static_cast<std::size_t>(r)].failures) failures.push_back(fmt::format("rank {}: {}", r, f));
  }
  return failures;
}

}  // namespace dcomm::test
