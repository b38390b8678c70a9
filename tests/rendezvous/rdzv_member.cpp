// One process of a multi-process bootstrap test: joins through rdzv::bootstrap() configured by the environment,
// prints its identity on one line, and waits until every rank printed before leaving (rank 0 may host the store).
// Exit codes: 0 joined, 3 a dcomm::Error (its message on stderr), 4 anything else.

#include <dcomm/error.hpp>

#include "common/deadline.hpp"
#include "rendezvous/bootstrap.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

int main() {
  try {
    dcomm::rdzv::Bootstrap b = dcomm::rdzv::bootstrap({});
    const dcomm::Identity& id = b.identity;
    std::printf("%s\n", fmt::format("{} {} {} {} {} {} {} {} {} {}", id.rank, id.world_size, id.local_rank,
                                    id.local_world_size, id.node_rank, id.node_count, id.host_id, id.source,
                                    b.world_id, b.server ? 1 : 0)
                            .c_str());
    std::fflush(stdout);
    b.store->set(fmt::format("printed/{}", id.rank), std::string("1"));
    std::vector<std::string> all;
    for (int r = 0; r < id.world_size; ++r) all.push_back(fmt::format("printed/{}", r));
    b.store->wait(all);
    // Everyone saw everyone; the host leaves last so no peer loses the store mid-call.
    b.store->add("left", 1);
    dcomm::Deadline deadline = dcomm::Deadline::after(b.timeout);
    while (b.server && b.store->add("left", 0) < id.world_size && !deadline.expired()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return 0;
  } catch (const dcomm::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unexpected: %s\n", e.what());
    return 4;
  }
}
