#include "tools/bench/report.hpp"

#include <fmt/format.h>

#include <map>
#include <tuple>

namespace dcomm::bench {

std::string table_header(bool vs_mpi) {
  std::string h = fmt::format("#{:>11} {:>12} {:>9} {:>10} {:>6} {:<18} {:>50} {:>17} {:>7} {:>9}", "", "", "", "",
                              "", "", "time (us)", "bandwidth (GB/s)", "", "straggler");
  if (vs_mpi) h += fmt::format(" {:>9}", "dcomm/");
  h += fmt::format(
      "\n#{:>11} {:>12} {:>9} {:>10} {:>6} {:<18} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>7} {:>9}",
      "size(B)", "count", "type", "redop", "lib", "algo", "mean", "min", "max", "p50", "p99", "loop", "algbw", "busbw",
      "#wrong", "rank");
  if (vs_mpi) h += fmt::format(" {:>9}", "mpi");
  return h;
}

std::string table_line(const Row& r, bool vs_mpi) {
  const std::string algo = r.chosen.empty() ? r.algo : r.algo + ":" + r.chosen;  // "auto:ring"
  std::string line = fmt::format("{:>12} {:>12} {:>9} {:>10} {:>6} {:<18}", r.bytes, r.count, to_string(r.dtype),
                                 r.op.empty() ? "-" : r.op, r.library, algo);
  if (!r.skipped.empty()) return line + "  skipped: " + r.skipped;
  line += fmt::format(" {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>8.3f} {:>8.3f} {:>7} {:>9}",
                      r.time_us.mean, r.time_us.min, r.time_us.max, r.time_us.p50, r.time_us.p99, r.loop_us,
                      r.algbw_gbps, r.busbw_gbps, r.wrong,
                      fmt::format("r{}+{:.0f}%", r.slowest_rank, r.slowest_excess * 100));
  if (vs_mpi) line += r.vs_mpi ? fmt::format(" {:>9.2f}", *r.vs_mpi) : fmt::format(" {:>9}", "-");
  return line;
}

std::vector<BusbwAverage> average_busbw(const std::vector<Row>& rows) {
  std::vector<BusbwAverage> out;
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<std::size_t, double>> sums;
  for (const Row& r : rows) {
    if (!r.skipped.empty() || r.coll == Coll::kBarrier) continue;
    auto key = std::make_tuple(std::string(to_string(r.coll)), r.library, r.algo);
    auto [it, fresh] = sums.try_emplace(key, out.size(), 0.0);
    if (fresh) out.push_back({std::get<0>(key), r.library, r.algo, 0.0});
    it->second.second += r.busbw_gbps;
    out[it->second.first].gbps += 1;  // the count, until divided below
  }
  for (const auto& [key, slot] : sums) out[slot.first].gbps = slot.second / out[slot.first].gbps;
  return out;
}

std::string table_footer(const std::vector<Row>& rows) {
  std::string f;
  std::size_t wrong = 0;
  for (const Row& r : rows) wrong += r.wrong;
  for (const BusbwAverage& a : average_busbw(rows)) {
    f += fmt::format("# Avg bus bandwidth: {:>9.3f} GB/s  {} {} {}\n", a.gbps, a.collective, a.library, a.algorithm);
  }
  f += fmt::format("# Wrong elements: {}\n", wrong);
  return f;
}

}  // namespace dcomm::bench
