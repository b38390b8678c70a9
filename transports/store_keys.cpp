#include "transports/store_keys.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <dcomm/error.hpp>

namespace dcomm::transport {

std::string rank_key(const std::string& key, int rank) { return fmt::format("{}/{}", key, rank); }

void wait_for_ranks(Store& store, const std::string& key, int world_size, const Deadline& deadline,
                    const std::string& what, const std::string& step, const rdzv::FailureWatch& watch) {
  std::vector<int> ranks;
  for (int r = 0; r < world_size; ++r) ranks.push_back(r);
  wait_for_ranks(store, key, ranks, deadline, what, step, watch);
}

void wait_for_ranks(Store& store, const std::string& key, const std::vector<int>& ranks, const Deadline& deadline,
                    const std::string& what, const std::string& step, const rdzv::FailureWatch& watch) {
  std::vector<std::string> keys;
  for (int r : ranks) keys.push_back(rank_key(key, r));
  if (keys.empty()) return;
  try {
    rdzv::wait_watching_failures(store, keys, deadline, watch, what);
  } catch (const TimeoutError&) {
    std::vector<int> missing;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      if (!store.check({keys[i]})) missing.push_back(ranks[i]);
    }
    throw TimeoutError(fmt::format(
        "{}: rank(s) {} did not {} within {} (timeout {}); check that they started, reach the store ({}) and "
        "did not fail earlier - see their logs",
        what, fmt::join(missing, ", "), step, format_duration(deadline.elapsed()),
        format_duration(deadline.timeout()), store.describe()));
  }
}

}  // namespace dcomm::transport
