// A rank dies (SIGKILL) in the middle of a stream of all_reduce calls. Every survivor must fail within a few
// seconds with an error naming the dead rank, print it, and exit 3; dcomm-run must give them the time to.
//   dcomm-run --nproc-per-node 3 -- mp_peer_death [count [reduce]]
// count: floats per call (default 65536, by messages; 2 rides the shared-memory slots on one node). "reduce":
// reduce to rank 1, the rank that dies, instead: through the slots the survivors only send and return at once, so
// they find the dead root in a later call, while they wait for its part of the call before (slots.hpp).

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <dcomm/dcomm.hpp>

int main(int argc, char** argv) {
  auto pg = dcomm::init();
  std::vector<float> x(argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1 << 16);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(pg->rank() + 1) + static_cast<float>(i % 7);
  const bool reduce = argc > 2 && std::string(argv[2]) == "reduce";
  std::vector<float> y(x.size());
  try {
    for (int i = 0; i < 1000000; ++i) {
      if (i == 20 && pg->rank() == 1) std::raise(SIGKILL);
      if (reduce) {
        pg->reduce(dcomm::Buffer(x), dcomm::Buffer(y), 1, dcomm::ReduceOp::kMax);
      } else {
        pg->all_reduce(dcomm::Buffer(x), dcomm::ReduceOp::kMax);
      }
    }
  } catch (const dcomm::Error& e) {
    std::fprintf(stderr, "survivor rank %d: %s: %s\n", pg->rank(), dcomm::to_string(e.code()), e.what());
    return 3;
  }
  std::fprintf(stderr, "rank %d finished a million calls without noticing the dead peer\n", pg->rank());
  return 0;
}
