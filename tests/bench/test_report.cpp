// Rows from every rank's timings, and their table, JSON and CSV forms: the keys and types the schema in
// docs/benchmark.md promises.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sstream>

#include "tools/bench/report.hpp"
#include "tools/bench/row.hpp"

using namespace dcomm;
using namespace dcomm::bench;
using nlohmann::json;

namespace {

Case small_case(Coll coll, int world) {
  Case c;
  c.coll = coll;
  c.dtype = DType::kFloat32;
  c.layout = layout(coll, 4096, c.dtype, world);
  c.iters = 4;
  c.world = world;
  c.algo = "ring";
  return c;
}

// Rank r takes (r + 1) * (10, 20, 30, 40) us: rank 2 is the straggler, 3x the fastest.
std::vector<LocalResult> timings(int world) {
  std::vector<LocalResult> out;
  for (int r = 0; r < world; ++r) {
    LocalResult lr;
    for (int i = 1; i <= 4; ++i) lr.times_us.push_back(10.0 * i * (r + 1));
    lr.wrong = r == 1 ? 2 : 0;
    lr.loop_us = 30.0 * (r + 1);  // a little above the mean: the work between calls
    out.push_back(lr);
  }
  return out;
}

}  // namespace

TEST_CASE("make_row: stats across ranks and iterations, bandwidth, straggler", "[bench][report]") {
  Row row = make_row(small_case(Coll::kAllReduce, 3), "dcomm", timings(3));
  CHECK(row.time_us.mean == Approx(50));  // the ranks' means are 25, 50, 75
  CHECK(row.time_us.min == Approx(25));
  CHECK(row.time_us.max == Approx(75));
  CHECK(row.time_us.p50 == Approx(60));   // per iteration the slowest rank: 30, 60, 90, 120
  CHECK(row.time_us.p99 == Approx(120));
  CHECK(row.loop_us == Approx(90));       // the slowest rank's loop period
  CHECK(row.slowest_rank == 2);
  CHECK(row.slowest_excess == Approx(2.0));
  CHECK(row.wrong == 2);
  CHECK(row.algbw_gbps == Approx(4096 / 50e-6 / 1e9));
  CHECK(row.busbw_gbps == Approx(row.algbw_gbps * 4.0 / 3.0));
  REQUIRE(row.ranks.size() == 3);
  CHECK(row.ranks[1].wrong == 2);
  CHECK(row.ranks[2].max_us == Approx(120));
}

TEST_CASE("a rank without a sendrecv partner does not count in the statistics", "[bench][report]") {
  std::vector<LocalResult> t = timings(3);
  t[2].times_us.assign(4, 0.01);  // rank 2 of 3 only waits
  t[2].loop_us = 1000;
  Case c = small_case(Coll::kSendRecv, 3);
  c.algo = "";  // point-to-point has no algorithm
  Row row = make_row(c, "dcomm", t);
  CHECK(row.time_us.min == Approx(25));
  CHECK(row.slowest_rank == 1);
  CHECK(row.loop_us == Approx(60));  // rank 1's; rank 2's waiting does not count
  CHECK(row.ranks.size() == 3);
  CHECK(row.algo == "-");
}

TEST_CASE("results round-trip through the store's byte form", "[bench][report]") {
  LocalResult r{{1.5, 2.5, 3.25}, 7, 2.75};
  LocalResult back = decode(encode(r));
  CHECK(back.times_us == r.times_us);
  CHECK(back.wrong == 7);
  CHECK(back.loop_us == 2.75);
  CHECK(decode(encode(LocalResult{})).times_us.empty());
  CHECK_THROWS(decode(Store::Bytes(5)));
  CHECK_THROWS(decode(Store::Bytes(8)));   // the old record, without the loop period
  CHECK_THROWS(decode(Store::Bytes(20)));
}

TEST_CASE("JSON has the documented keys and types", "[bench][report]") {
  Options o;
  o.colls = {Coll::kAllReduce};
  o.argv = {"dcomm-bench", "all_reduce"};
  o.vs_mpi = true;
  Row d = make_row(small_case(Coll::kAllReduce, 2), "dcomm", timings(2));
  Row m = make_row(small_case(Coll::kAllReduce, 2), "mpi", timings(2));
  d.vs_mpi = 0.5;
  Row s = skipped_row(small_case(Coll::kAllReduce, 2), "mpi", "MPI has no avg op");
  setenv("DCOMM_BENCH_TEST_MARK", "1", 1);
  json doc = json::parse(to_json(o, 2, {d, m, s}));
  unsetenv("DCOMM_BENCH_TEST_MARK");
  CHECK(doc["tool"] == "dcomm-bench");
  CHECK(doc["version"].is_string());
  CHECK(doc["world_size"] == 2);
  const json& a = doc["arguments"];
  CHECK(a["argv"].is_array());
  CHECK(a["collectives"] == json::array({"all_reduce"}));
  for (const char* k : {"min_bytes", "max_bytes", "factor", "iters", "warmup", "root"}) CHECK(a[k].is_number_integer());
  for (const char* k : {"dtypes", "ops"}) CHECK(a[k].is_array());
  for (const char* k : {"algo", "device", "vs"}) CHECK(a[k].is_string());
  for (const char* k : {"inplace", "check"}) CHECK(a[k].is_boolean());
  CHECK(a["timeout_s"].is_number());
  CHECK(doc["environment"]["DCOMM_BENCH_TEST_MARK"] == "1");
  const json& mach = doc["machine"];
  CHECK(mach["hostname"].is_string());
  CHECK(mach["cores"].is_number_integer());
  CHECK(mach["cpu_model"].is_string());
  CHECK(mach["memory_bytes"].is_number_integer());
  REQUIRE(doc["results"].size() == 3);
  const json& r = doc["results"][0];
  for (const char* k : {"library", "collective", "algorithm", "dtype", "op"}) CHECK(r[k].is_string());
  for (const char* k : {"bytes", "count", "world_size", "wrong", "slowest_rank"}) CHECK(r[k].is_number_integer());
  for (const char* k : {"mean", "min", "max", "p50", "p99", "loop"}) CHECK(r["time_us"][k].is_number());
  CHECK(r["time_us"]["loop"] == Approx(60));
  for (const char* k : {"algbw_gbps", "busbw_gbps", "slowest_excess", "vs_mpi"}) CHECK(r[k].is_number());
  CHECK(r["inplace"].is_boolean());
  CHECK(r["skipped"].is_null());
  CHECK(r["chosen_algorithm"].is_null());
  REQUIRE(r["ranks"].size() == 2);
  for (const char* k : {"rank", "wrong"}) CHECK(r["ranks"][1][k].is_number_integer());
  for (const char* k : {"mean_us", "min_us", "max_us", "loop_us"}) CHECK(r["ranks"][1][k].is_number());
  CHECK(doc["results"][1]["vs_mpi"].is_null());
  CHECK(doc["results"][2]["skipped"] == "MPI has no avg op");
  CHECK(doc["summary"]["wrong"] == 4);
  REQUIRE(doc["summary"]["avg_busbw"].size() == 2);  // dcomm ring and mpi; the skipped row does not count
  CHECK(doc["summary"]["avg_busbw"][0]["busbw_gbps"].is_number());
}

TEST_CASE("CSV has one header and one line per row, every line the same width", "[bench][report]") {
  Row d = make_row(small_case(Coll::kAllGather, 2), "dcomm", timings(2));
  Row s = skipped_row(small_case(Coll::kAllGather, 2), "mpi", "count exceeds MPI's int");
  std::istringstream in(to_csv({d, s}));
  std::string line;
  std::vector<std::size_t> commas;
  while (std::getline(in, line)) commas.push_back(static_cast<std::size_t>(std::count(line.begin(), line.end(), ',')));
  REQUIRE(commas.size() == 3);
  CHECK(commas[1] == commas[0]);
  CHECK(commas[2] == commas[0]);
}

TEST_CASE("table lines and footer", "[bench][report]") {
  Row d = make_row(small_case(Coll::kAllReduce, 2), "dcomm", timings(2));
  d.vs_mpi = 1.25;
  const std::string line = table_line(d, true);
  CHECK(line.find("4096") != std::string::npos);
  CHECK(line.find("ring") != std::string::npos);
  Row a = d;
  a.algo = "auto";
  a.chosen = "tree";
  CHECK(table_line(a, false).find("auto:tree") != std::string::npos);
  CHECK(line.find("r1+100%") != std::string::npos);
  CHECK(line.find("1.25") != std::string::npos);
  CHECK(table_header(true).find("dcomm/") != std::string::npos);
  CHECK(table_header(false).find("dcomm/") == std::string::npos);
  const std::string footer = table_footer({d});
  CHECK(footer.find("# Avg bus bandwidth") != std::string::npos);
  CHECK(footer.find("# Wrong elements: 2") != std::string::npos);
}

TEST_CASE("--rules-out: the fastest correct row at each measured size, merged, within the measured sizes",
          "[bench][report]") {
  auto row = [](Coll coll, std::size_t bytes, const char* algo, double p50, std::size_t wrong = 0,
                const char* library = "dcomm") {
    Row r;
    r.library = library;
    r.coll = coll;
    r.bytes = bytes;
    r.algo = algo;
    r.time_us.p50 = p50;
    r.wrong = wrong;
    return r;
  };
  std::vector<Row> rows = {
      row(Coll::kAllReduce, 1024, "ring", 9), row(Coll::kAllReduce, 1024, "tree", 5),
      row(Coll::kAllReduce, 1024, "auto", 1),                 // what the group chose: never a rule
      row(Coll::kAllReduce, 1024, "-", 0.5, 0, "mpi"),        // the peer's row: never a rule
      row(Coll::kAllReduce, 4096, "tree", 7), row(Coll::kAllReduce, 4096, "ring", 8),
      row(Coll::kAllReduce, 16384, "ring", 10), row(Coll::kAllReduce, 16384, "bruck", 3, 5),  // wrong elements
      row(Coll::kAllReduce, 16384, "tree", 12), row(Coll::kBroadcast, 64, "binomial", 2),
      row(Coll::kBarrier, 0, "dissemination", 2)};  // barrier: the model's, never a rule
  Row skipped = row(Coll::kBroadcast, 64, "chain", 1);
  skipped.skipped = "the algorithm does not handle this call";
  rows.push_back(skipped);
  const json j = json::parse(to_rules(rows, 3, false));
  const json& r = j.at("rules");
  REQUIRE(r.size() == 3);
  // tree at 1 KiB and 4 KiB merge; ring from halfway (geometrically) between 4 and 16 KiB, through 16 KiB.
  CHECK(r[0] == json({{"collective", "all_reduce"}, {"ranks", 3}, {"min_bytes", 1024}, {"max_bytes", 8192},
                      {"algorithm", "tree"}}));
  CHECK(r[1] == json({{"collective", "all_reduce"}, {"ranks", 3}, {"min_bytes", 8192}, {"max_bytes", 16385},
                      {"algorithm", "ring"}}));
  CHECK(r[2] == json({{"collective", "broadcast"}, {"ranks", 3}, {"min_bytes", 64}, {"max_bytes", 65},
                      {"algorithm", "binomial"}}));
  CHECK(json::parse(to_rules(rows, 2, true)).at("rules")[0].at("device") == true);
}
