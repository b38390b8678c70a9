#include "tools/bench/row.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "tools/bench/busbw.hpp"

namespace dcomm::bench {
namespace {

Row base_row(const Case& c, const std::string& library) {
  Row row;
  row.library = library;
  row.coll = c.coll;
  row.dtype = c.dtype;
  row.op = is_reducing(c.coll) ? to_string(c.op) : "";
  row.algo = c.algo.empty() ? "auto" : c.algo;
  if (c.coll == Coll::kSendRecv || library != "dcomm") row.algo = c.algo.empty() ? "-" : c.algo;
  row.bytes = c.layout.bytes;
  row.count = c.layout.count;
  row.inplace = c.inplace;
  row.world = c.world;
  return row;
}

}  // namespace

Row make_row(const Case& c, const std::string& library, const std::vector<LocalResult>& per_rank) {
  Row row = base_row(c, library);
  std::vector<double> means;
  std::vector<double> slowest_per_iter(static_cast<std::size_t>(c.iters), 0.0);
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    const LocalResult& lr = per_rank[r];
    const Summary s = summarize(lr.times_us);
    row.ranks.push_back({static_cast<int>(r), s.mean, s.min, s.max, lr.loop_us, lr.wrong});
    row.wrong += lr.wrong;
    // A rank with no sendrecv partner only waits; its near-zero times would flatter the statistics.
    if (c.coll == Coll::kSendRecv && sendrecv_partner(static_cast<int>(r), c.world) < 0) continue;
    means.push_back(s.mean);
    row.loop_us = std::max(row.loop_us, lr.loop_us);
    for (std::size_t i = 0; i < lr.times_us.size() && i < slowest_per_iter.size(); ++i) {
      slowest_per_iter[i] = std::max(slowest_per_iter[i], lr.times_us[i]);
    }
    if (row.slowest_rank < 0 || s.mean > row.ranks[static_cast<std::size_t>(row.slowest_rank)].mean_us) {
      row.slowest_rank = static_cast<int>(r);
    }
  }
  const Summary across = summarize(means);
  row.time_us = {across.mean, across.min, across.max, percentile(slowest_per_iter, 50),
                 percentile(slowest_per_iter, 99)};
  row.slowest_excess = across.min > 0 ? across.max / across.min - 1 : 0;
  row.algbw_gbps = algbw_gbps(row.bytes, row.time_us.mean * 1e-6);
  row.busbw_gbps = busbw_gbps(c.coll, c.world, row.bytes, row.time_us.mean * 1e-6);
  return row;
}

Row skipped_row(const Case& c, const std::string& library, const std::string& why) {
  Row row = base_row(c, library);
  row.skipped = why;
  return row;
}

namespace {
// The record: the wrong count (8 bytes), the loop period (8), then the per-call times (8 each).
constexpr std::size_t kHead = sizeof(uint64_t) + sizeof(double);
}  // namespace

Store::Bytes encode(const LocalResult& r) {
  Store::Bytes b(kHead + r.times_us.size() * sizeof(double));
  const uint64_t wrong = r.wrong;
  std::memcpy(b.data(), &wrong, sizeof wrong);
  std::memcpy(b.data() + sizeof wrong, &r.loop_us, sizeof r.loop_us);
  if (!r.times_us.empty()) std::memcpy(b.data() + kHead, r.times_us.data(), r.times_us.size() * sizeof(double));
  return b;
}

LocalResult decode(const Store::Bytes& b) {
  if (b.size() < kHead || (b.size() - kHead) % sizeof(double) != 0) {
    throw std::runtime_error("dcomm-bench: a rank's result record has " + std::to_string(b.size()) +
                             " bytes, not 16 + 8k: ranks run different dcomm-bench builds?");
  }
  LocalResult r;
  uint64_t wrong = 0;
  std::memcpy(&wrong, b.data(), sizeof wrong);
  r.wrong = wrong;
  std::memcpy(&r.loop_us, b.data() + sizeof wrong, sizeof r.loop_us);
  r.times_us.resize((b.size() - kHead) / sizeof(double));
  if (!r.times_us.empty()) std::memcpy(r.times_us.data(), b.data() + kHead, b.size() - kHead);
  return r;
}

}  // namespace dcomm::bench
