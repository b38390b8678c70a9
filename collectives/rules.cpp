#include "collectives/rules.hpp"

#include <fmt/format.h>

#include <dcomm/error.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "collectives/registry.hpp"
#include "common/deadline.hpp"

namespace dcomm::coll {

std::vector<Rule> load_rules(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InvalidUsageError(fmt::format("DCOMM_RULES_FILE '{}' cannot be read; unset it to let the cost model choose", path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw InvalidUsageError(fmt::format("DCOMM_RULES_FILE '{}' is not JSON: {}", path, e.what()));
  }
  if (!j.is_object() || !j.contains("rules") || !j["rules"].is_array()) {
    throw InvalidUsageError(fmt::format("DCOMM_RULES_FILE '{}': expected {{\"rules\": [...]}} (docs/algorithms.md)", path));
  }
  std::vector<Rule> rules;
  std::size_t index = 0;
  for (const nlohmann::json& r : j["rules"]) {
    auto bad = [&](const std::string& why) {
      return InvalidUsageError(fmt::format("DCOMM_RULES_FILE '{}', rule {} ({}): {}", path, index, r.dump(), why));
    };
    try {
      Rule rule;
      const std::string coll = r.at("collective").get<std::string>();
      if (!parse_collective(coll, &rule.coll)) throw bad("unknown collective '" + coll + "'");
      rule.ranks = r.value("ranks", 0);
      rule.min_bytes = r.value("min_bytes", uint64_t{0});
      rule.max_bytes = r.contains("max_bytes") && !r["max_bytes"].is_null() ? r["max_bytes"].get<uint64_t>() : UINT64_MAX;
      rule.algorithm = r.at("algorithm").get<std::string>();
      rule.device = r.value("device", false);
      if (find_algorithm(rule.coll, rule.algorithm) == nullptr) {
        throw bad(fmt::format("'{}' is no algorithm of {}", rule.algorithm, to_string(rule.coll)));
      }
      if (rule.ranks < 0) throw bad("ranks must be 0 (any) or a group size");
      if (rule.min_bytes >= rule.max_bytes) throw bad("min_bytes must be below max_bytes");
      rules.push_back(std::move(rule));
    } catch (const InvalidUsageError&) {
      throw;
    } catch (const std::exception& e) {
      throw bad(e.what());
    }
    ++index;
  }
  return rules;
}

std::string rules_json(const std::vector<Rule>& rules) {
  nlohmann::json out = nlohmann::json::array();
  for (const Rule& r : rules) {
    nlohmann::json j = {{"collective", to_string(r.coll)}, {"ranks", r.ranks}, {"min_bytes", r.min_bytes},
                        {"algorithm", r.algorithm}};
    if (r.max_bytes != UINT64_MAX) j["max_bytes"] = r.max_bytes;
    if (r.device) j["device"] = true;
    out.push_back(j);
  }
  return nlohmann::json{{"rules", out}}.dump(1) + "\n";
}

bool rule_matches(const Rule& r, Collective coll, int ranks, double bytes, bool device) {
  return r.coll == coll && r.device == device && (r.ranks == 0 || r.ranks == ranks) &&
         bytes >= static_cast<double>(r.min_bytes) &&
         (r.max_bytes == UINT64_MAX || bytes < static_cast<double>(r.max_bytes));
}

const Rule* find_rule(const std::vector<Rule>& rules, Collective coll, int ranks, double bytes, bool device) {
  for (const Rule& r : rules) {
    if (rule_matches(r, coll, ranks, bytes, device)) return &r;
  }
  return nullptr;
}

std::string describe(const Rule& r) {
  return fmt::format("{}{} on {}, {} to {}: {}", to_string(r.coll), r.device ? " on device buffers" : "",
                     r.ranks == 0 ? std::string("any number of ranks") : fmt::format("{} ranks", r.ranks),
                     format_bytes(static_cast<std::size_t>(r.min_bytes)),
                     r.max_bytes == UINT64_MAX ? std::string("any size") : format_bytes(static_cast<std::size_t>(r.max_bytes)),
                     r.algorithm);
}

}  // namespace dcomm::coll
