#include "tests/runtime/ranks.hpp"

#include <thread>

namespace dcomm::test {

std::vector<std::string> run_ranks(int size, const RankBody& body, Duration timeout) {
  auto store = make_memory_store(timeout);
  std::vector<std::vector<std::string>> per_rank(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto& failures = per_rank[static_cast<std::size_t>(r)];
      try {
        InitOptions opts;
        opts.rank = r;
        opts.world_size = size;
        opts.store = store;
        opts.transport = "loopback";
        opts.timeout = timeout;
        auto pg = init(opts);
        body(*pg, failures);
      } catch (const std::exception& e) {
        failures.push_back(std::string("exception: ") + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::string> all;
  for (int r = 0; r < size; ++r) {
    for (const auto& f : per_rank[static_cast<std::size_t>(r)]) all.push_back("rank " + std::to_string(r) + ": " + f);
  }
  return all;
}

}  // namespace dcomm::test
