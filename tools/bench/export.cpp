// JSON and CSV output of a run: the arguments, the environment, the machine and every row with its ranks.

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <map>
#include <fstream>
#include <sstream>
#include <thread>

#include "dcomm_config.h"
#include "collectives/rules.hpp"
#include "tools/bench/coll.hpp"
#include "tools/bench/report.hpp"

extern char** environ;

namespace dcomm::bench {
namespace {

using nlohmann::json;

// The first "key: value" line of a /proc file whose key starts with `key`.
std::string proc_field(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      auto start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  }
  return "";
}

json machine() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  // MemTotal is "24576000 kB".
  long long mem_kb = std::atoll(proc_field("/proc/meminfo", "MemTotal").c_str());
  return {{"hostname", host},
          {"cores", std::thread::hardware_concurrency()},
          {"cpu_model", proc_field("/proc/cpuinfo", "model name")},
          {"memory_bytes", mem_kb * 1024}};
}

// The variables that change dcomm's or UCX's behaviour, so a result can be reproduced.
json environment() {
  json env = json::object();
  for (char** e = environ; *e != nullptr; ++e) {
    const char* kv = *e;
    if (std::strncmp(kv, "DCOMM_", 6) != 0 && std::strncmp(kv, "UCX_", 4) != 0) continue;
    const char* eq = std::strchr(kv, '=');
    if (eq == nullptr) continue;
    std::string key(kv, eq);
    if (key == "DCOMM_STORE_SECRET") continue;  // a credential, not a setting
    env[key] = eq + 1;
  }
  return env;
}

json arguments(const Options& o) {
  json a;
  a["argv"] = o.argv;
  a["collectives"] = json::array();
  for (Coll c : o.colls) a["collectives"].push_back(to_string(c));
  a["min_bytes"] = o.min_bytes;
  a["max_bytes"] = o.max_bytes;
  a["factor"] = o.factor;
  a["iters"] = o.iters;
  a["warmup"] = o.warmup;
  a["dtypes"] = json::array();
  for (DType t : o.dtypes) a["dtypes"].push_back(to_string(t));
  a["ops"] = json::array();
  for (ReduceOp op : o.ops) a["ops"].push_back(to_string(op));
  a["root"] = o.root;
  a["algo"] = o.algo;
  a["device"] = o.device == Device::Kind::kCuda ? "cuda" : "host";
  a["inplace"] = o.inplace;
  a["check"] = o.check;
  a["vs"] = o.vs_mpi ? json("mpi") : json(nullptr);
  a["timeout_s"] = o.timeout_s;
  return a;
}

json row_json(const Row& r) {
  json j = {{"library", r.library},
            {"collective", to_string(r.coll)},
            {"algorithm", r.algo},
            {"chosen_algorithm", r.chosen.empty() ? json(nullptr) : json(r.chosen)},
            {"dtype", to_string(r.dtype)},
            {"op", r.op.empty() ? json(nullptr) : json(r.op)},
            {"bytes", r.bytes},
            {"count", r.count},
            {"inplace", r.inplace},
            {"world_size", r.world},
            {"time_us",
             {{"mean", r.time_us.mean}, {"min", r.time_us.min}, {"max", r.time_us.max}, {"p50", r.time_us.p50},
              {"p99", r.time_us.p99}, {"loop", r.loop_us}}},
            {"algbw_gbps", r.algbw_gbps},
            {"busbw_gbps", r.busbw_gbps},
            {"wrong", r.wrong},
            {"slowest_rank", r.slowest_rank},
            {"slowest_excess", r.slowest_excess},
            {"vs_mpi", r.vs_mpi ? json(*r.vs_mpi) : json(nullptr)},
            {"skipped", r.skipped.empty() ? json(nullptr) : json(r.skipped)}};
  j["ranks"] = json::array();
  for (const RankStats& s : r.ranks) {
    j["ranks"].push_back(
        {{"rank", s.rank}, {"mean_us", s.mean_us}, {"min_us", s.min_us}, {"max_us", s.max_us}, {"loop_us", s.loop_us},
         {"wrong", s.wrong}});
  }
  return j;
}

}  // namespace

std::string to_json(const Options& opts, int world, const std::vector<Row>& rows) {
  json doc;
  doc["tool"] = "dcomm-bench";
  doc["version"] = DCOMM_VERSION;
  doc["arguments"] = arguments(opts);
  doc["environment"] = environment();
  doc["machine"] = machine();
  doc["world_size"] = world;
  doc["results"] = json::array();
  std::size_t wrong = 0;
  for (const Row& r : rows) {
    doc["results"].push_back(row_json(r));
    wrong += r.wrong;
  }
  json avg = json::array();
  for (const BusbwAverage& a : average_busbw(rows)) {
    avg.push_back({{"collective", a.collective}, {"library", a.library}, {"algorithm", a.algorithm},
                   {"busbw_gbps", a.gbps}});
  }
  doc["summary"] = {{"avg_busbw", avg}, {"wrong", wrong}};
  return doc.dump(2) + "\n";
}

std::string to_csv(const std::vector<Row>& rows) {
  std::ostringstream out;
  out << "library,collective,algorithm,dtype,op,bytes,count,inplace,world_size,mean_us,min_us,max_us,p50_us,p99_us,"
         "loop_us,algbw_gbps,busbw_gbps,wrong,slowest_rank,vs_mpi,skipped\n";
  for (const Row& r : rows) {
    out << r.library << ',' << to_string(r.coll) << ',' << r.algo << ',' << to_string(r.dtype) << ',' << r.op << ','
        << r.bytes << ',' << r.count << ',' << (r.inplace ? 1 : 0) << ',' << r.world << ',' << r.time_us.mean << ','
        << r.time_us.min << ',' << r.time_us.max << ',' << r.time_us.p50 << ',' << r.time_us.p99 << ','
        << r.loop_us << ',' << r.algbw_gbps << ',' << r.busbw_gbps << ',' << r.wrong << ',' << r.slowest_rank << ',';
    if (r.vs_mpi) out << *r.vs_mpi;
    // Skip reasons are prose: quote them so commas inside cannot shift columns.
    out << ',' << (r.skipped.empty() ? "" : "\"" + r.skipped + "\"") << '\n';
  }
  return out.str();
}

std::string to_rules(const std::vector<Row>& rows, int world, bool device) {
  // collective -> size -> (p50, algorithm) of the fastest correct row
  std::map<Collective, std::map<std::size_t, std::pair<double, std::string>>> best;
  for (const Row& r : rows) {
    Collective c{};
    if (r.library != "dcomm" || r.algo == "auto" || !r.skipped.empty() || r.wrong != 0 || !to_collective(r.coll, &c) ||
        c == Collective::kBarrier) {
      continue;
    }
    auto [it, fresh] = best[c].try_emplace(r.bytes, r.time_us.p50, r.algo);
    if (!fresh && r.time_us.p50 < it->second.first) it->second = {r.time_us.p50, r.algo};
  }
  std::vector<coll::Rule> rules;
  for (const auto& [c, sizes] : best) {
    std::vector<coll::Rule> mine;
    std::size_t previous = 0;
    for (const auto& [bytes, fastest] : sizes) {
      coll::Rule rule;
      rule.coll = c;
      rule.ranks = world;
      rule.device = device;
      rule.algorithm = fastest.second;
      rule.min_bytes = mine.empty() ? bytes : static_cast<uint64_t>(std::llround(std::sqrt(double(previous) * double(bytes))));
      rule.max_bytes = bytes + 1;
      if (!mine.empty() && mine.back().algorithm == rule.algorithm) {
        mine.back().max_bytes = rule.max_bytes;  // merged: the last rule reaches this size
      } else {
        if (!mine.empty()) mine.back().max_bytes = rule.min_bytes;
        mine.push_back(rule);
      }
      previous = bytes;
    }
    rules.insert(rules.end(), mine.begin(), mine.end());
  }
  return coll::rules_json(rules);
}

}  // namespace dcomm::bench
