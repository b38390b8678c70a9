// The arithmetic of the report: size parsing and sweeps, how sizes lay out per collective, bus bandwidth factors
// against the formulas derived by hand, and the statistics.

#include <catch2/catch.hpp>

#include "tools/bench/busbw.hpp"
#include "tools/bench/sizes.hpp"
#include "tools/bench/stats.hpp"

using namespace dcomm;
using namespace dcomm::bench;

TEST_CASE("parse_size understands suffixes and refuses junk", "[bench][sizes]") {
  CHECK(parse_size("0") == 0u);
  CHECK(parse_size("17") == 17u);
  CHECK(parse_size("4K") == 4096u);
  CHECK(parse_size("4k") == 4096u);
  CHECK(parse_size("4KB") == 4096u);
  CHECK(parse_size("4KiB") == 4096u);
  CHECK(parse_size("1.5M") == 1572864u);
  CHECK(parse_size("2G") == 2147483648u);
  CHECK(parse_size("3B") == 3u);
  CHECK_FALSE(parse_size(""));
  CHECK_FALSE(parse_size("K"));
  CHECK_FALSE(parse_size("4X"));
  CHECK_FALSE(parse_size("-4"));
  CHECK_FALSE(parse_size("1.5"));   // not a whole number of bytes
  CHECK_FALSE(parse_size("4iB"));
}

TEST_CASE("sweep is geometric and includes both ends", "[bench][sizes]") {
  CHECK(sweep(8, 64, 2) == std::vector<std::size_t>{8, 16, 32, 64});
  CHECK(sweep(8, 100, 4) == std::vector<std::size_t>{8, 32});
  CHECK(sweep(5, 5, 2) == std::vector<std::size_t>{5});
  CHECK(sweep(0, 4, 2) == std::vector<std::size_t>{0, 1, 2, 4});
  // No overflow near the top of size_t.
  const std::size_t big = std::size_t{1} << 62;
  CHECK(sweep(big, big * 3, 2) == std::vector<std::size_t>{big, big * 2});
}

TEST_CASE("layout splits rank-partitioned collectives over the world", "[bench][sizes]") {
  // 3 ranks, 4-byte elements, 100 bytes: 8 elements per rank, 96 bytes in all.
  Layout ag = layout(Coll::kAllGather, 100, DType::kFloat32, 3);
  CHECK(ag.send_count == 8);
  CHECK(ag.recv_count == 24);
  CHECK(ag.block == 8);
  CHECK(ag.bytes == 96);
  CHECK(ag.count == 24);
  Layout rs = layout(Coll::kReduceScatter, 100, DType::kFloat32, 3);
  CHECK(rs.send_count == 24);
  CHECK(rs.recv_count == 8);
  Layout sc = layout(Coll::kScatter, 100, DType::kFloat32, 3);
  CHECK(sc.send_count == 24);
  CHECK(sc.recv_count == 8);
  Layout ga = layout(Coll::kGather, 100, DType::kFloat32, 3);
  CHECK(ga.send_count == 8);
  CHECK(ga.recv_count == 24);
  Layout a2a = layout(Coll::kAllToAll, 100, DType::kFloat32, 3);
  CHECK(a2a.send_count == 24);
  CHECK(a2a.recv_count == 24);
  CHECK(a2a.block == 8);
  Layout ar = layout(Coll::kAllReduce, 100, DType::kFloat64, 3);
  CHECK(ar.send_count == 12);
  CHECK(ar.recv_count == 12);
  CHECK(ar.bytes == 96);
  CHECK(layout(Coll::kBarrier, 100, DType::kFloat32, 3).bytes == 0);
  CHECK(layout(Coll::kSendRecv, 7, DType::kUInt8, 3).count == 7);
}

TEST_CASE("bus bandwidth factors match nccl-tests", "[bench][busbw]") {
  for (int p : {1, 2, 3, 4, 7, 8}) {
    const double n = p;
    CHECK(bus_factor(Coll::kAllReduce, p) == Approx(2 * (n - 1) / n));
    for (Coll c : {Coll::kReduceScatter, Coll::kAllGather, Coll::kAllToAll, Coll::kGather, Coll::kScatter}) {
      CHECK(bus_factor(c, p) == Approx((n - 1) / n));
    }
    for (Coll c : {Coll::kBroadcast, Coll::kReduce, Coll::kSendRecv}) CHECK(bus_factor(c, p) == 1.0);
    CHECK(bus_factor(Coll::kBarrier, p) == 0.0);
  }
  // 1 GB in 0.5 s: algbw 2 GB/s; all_reduce on 4 ranks moves 2 * 3/4 of it per link: 3 GB/s.
  CHECK(algbw_gbps(1000000000, 0.5) == Approx(2.0));
  CHECK(busbw_gbps(Coll::kAllReduce, 4, 1000000000, 0.5) == Approx(3.0));
  CHECK(busbw_gbps(Coll::kAllGather, 4, 1000000000, 0.5) == Approx(1.5));
  CHECK(busbw_gbps(Coll::kBroadcast, 4, 1000000000, 0.5) == Approx(2.0));
  CHECK(algbw_gbps(100, 0.0) == 0.0);
}

TEST_CASE("statistics: mean, min, max and nearest-rank percentiles", "[bench][stats]") {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // 1..100, unsorted
  Summary s = summarize(v);
  CHECK(s.mean == Approx(50.5));
  CHECK(s.min == 1);
  CHECK(s.max == 100);
  CHECK(s.p50 == 50);
  CHECK(s.p99 == 99);
  CHECK(percentile({7.0}, 99) == 7.0);
  CHECK(percentile({1, 2, 3}, 0) == 1);
  CHECK(percentile({1, 2, 3}, 100) == 3);
  CHECK(percentile({3, 1, 2, 4}, 50) == 2);
  CHECK(percentile({}, 50) == 0);
  CHECK(summarize({}).mean == 0);
}
