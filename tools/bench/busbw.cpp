#include "tools/bench/busbw.hpp"

namespace dcomm::bench {

double bus_factor(Coll c, int world) noexcept {
  const double p = world;
  switch (c) {
    case Coll::kAllReduce: return 2.0 * (p - 1) / p;
    case Coll::kReduceScatter:
    case Coll::kAllGather:
    case Coll::kAllToAll:
    case Coll::kGather:
    case Coll::kScatter: return (p - 1) / p;
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSendRecv: return 1.0;
    case Coll::kBarrier: return 0.0;
  }
  return 0.0;
}

double algbw_gbps(std::size_t bytes, double seconds) noexcept {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
}

double busbw_gbps(Coll c, int world, std::size_t bytes, double seconds) noexcept {
  return algbw_gbps(bytes, seconds) * bus_factor(c, world);
}

}  // namespace dcomm::bench
