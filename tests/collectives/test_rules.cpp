// Measured rules (DCOMM_RULES_FILE, collectives/rules.hpp): their ranges, group sizes and device kinds, the
// selector taking them before the cost model and explain() saying so, and bad files named.

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <dcomm/error.hpp>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "collectives/rules.hpp"
#include "tests/collectives/harness.hpp"

using namespace dcomm;
using namespace dcomm::coll;

using test::invalid_message;
using test::soon;

TEST_CASE("DCOMM_RULES_FILE: measured rules choose before the model, in their ranges, and bad files are named",
          "[collectives][engine]") {
  const std::string path = "/tmp/dcomm_rules_" + std::to_string(::getpid()) + ".json";
  auto write = [&](const std::string& text) {
    std::ofstream out(path);
    out << text;
  };
  // 3 ranks, all_reduce: tree from 1 KiB up to 64 KiB, bruck from 64 KiB to 1 MiB; another group size's rule and
  // a device rule that must not apply; broadcast by any group: chain.
  write(R"({"rules": [
    {"collective": "all_reduce", "ranks": 5, "min_bytes": 0, "max_bytes": 1048576, "algorithm": "ring"},
    {"collective": "all_reduce", "ranks": 3, "min_bytes": 1024, "max_bytes": 65536, "algorithm": "tree", "device": true},
    {"collective": "all_reduce", "ranks": 3, "min_bytes": 1024, "max_bytes": 65536, "algorithm": "tree"},
    {"collective": "allreduce", "ranks": 3, "min_bytes": 65536, "max_bytes": 1048576, "algorithm": "bruck"},
    {"collective": "broadcast", "algorithm": "chain"}]})");
  const std::vector<Rule> rules = load_rules(path);
  REQUIRE(rules.size() == 5);
  CHECK(find_rule(rules, Collective::kAllReduce, 3, 1023, false) == nullptr);
  CHECK(find_rule(rules, Collective::kAllReduce, 3, 1024, false)->algorithm == "tree");
  CHECK(find_rule(rules, Collective::kAllReduce, 3, 1024, false) == &rules[2]);  // not the device rule
  CHECK(find_rule(rules, Collective::kAllReduce, 3, 1024, true) == &rules[1]);
  CHECK(find_rule(rules, Collective::kAllReduce, 3, 65536, false)->algorithm == "bruck");
  CHECK(find_rule(rules, Collective::kAllReduce, 3, 1048576, false) == nullptr);
  CHECK(find_rule(rules, Collective::kAllReduce, 4, 4096, false) == nullptr);
  CHECK(find_rule(rules, Collective::kBroadcast, 7, 1e9, false)->algorithm == "chain");
  CHECK(load_rules(path).size() == 5);
  CHECK(describe(rules[2]) == "all_reduce on 3 ranks, 1.0 KiB to 64.0 KiB: tree");
  // What dcomm-bench writes reads back the same.
  write(rules_json(rules));
  const std::vector<Rule> again = load_rules(path);
  REQUIRE(again.size() == rules.size());
  for (std::size_t i = 0; i < rules.size(); ++i) CHECK(describe(again[i]) == describe(rules[i]));
  write(rules_json(rules));
  {
    test::ScopedEnv env("DCOMM_RULES_FILE", path.c_str());
    auto records = test::run_group(3, [&](const GroupView& view, test::RankRecord& rec) {
      auto engine = Engine::create(view);
      const std::string text = engine->explain(Collective::kAllReduce, 4096);
      if (text.find("choice: tree (measured: " + path) == std::string::npos) {
        rec.failures.push_back("rule not taken: " + text);
      }
      if (engine->explain(Collective::kAllReduce, 8).find("(cost model)") == std::string::npos) {
        rec.failures.push_back("a size outside every rule did not go to the model");
      }
      // The call runs the rule's algorithm and sums right; a size no rule covers is the model's.
      for (std::size_t count : {std::size_t{1000}, std::size_t{20000}, std::size_t{3}}) {
        std::vector<double> x(count);
        for (std::size_t i = 0; i < count; ++i) x[i] = static_cast<double>(view.rank * 1000 + i % 97);
        std::atomic<const char*> chosen{nullptr};
        Args a;
        a.coll = Collective::kAllReduce;
        a.send = a.recv = Buffer(x);
        a.chosen_algorithm = &chosen;
        engine->run(a, "", soon(), count);
        const std::string want = count == 1000 ? "tree" : count == 20000 ? "bruck" : "";
        if (!want.empty() && want != chosen.load()) rec.failures.push_back(fmt::format("{} elements ran {}", count, chosen.load()));
        for (std::size_t i = 0; i < count; ++i) {
          if (x[i] != 3000.0 + 3.0 * static_cast<double>(i % 97)) {
            rec.failures.push_back(fmt::format("{} elements: element {} is {}", count, i, x[i]));
            break;
          }
        }
      }
    });
    auto failures = test::summarize(records);
    INFO((failures.empty() ? "" : failures.front()));
    CHECK(failures.empty());
  }
  for (const auto& [text, expect] : std::vector<std::pair<std::string, std::string>>{
           {"{ not json", "is not JSON"},
           {R"({"rule": []})", "expected {\"rules\""},
           {R"({"rules": [{"collective": "allsum", "algorithm": "ring"}]})", "unknown collective 'allsum'"},
           {R"({"rules": [{"collective": "all_reduce", "algorithm": "fastest"}]})", "'fastest' is no algorithm of all_reduce"},
           {R"({"rules": [{"collective": "all_reduce", "algorithm": "ring", "min_bytes": 9, "max_bytes": 9}]})",
            "min_bytes must be below max_bytes"},
           {R"({"rules": [{"collective": "all_reduce"}]})", "rule 0"}}) {
    write(text);
    INFO(text);
    const std::string message = invalid_message([&] { load_rules(path); });
    CHECK_THAT(message, Catch::Contains(path) && Catch::Contains(expect));
  }
  std::remove(path.c_str());
  CHECK_THAT(invalid_message([&] { load_rules(path); }), Catch::Contains("cannot be read"));
}

