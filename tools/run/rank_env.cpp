#include "tools/run/rank_env.hpp"

#include <fmt/format.h>

#include <unordered_set>

#include "tools/run/status_line.hpp"
#include "tools/run/torch_env.hpp"

extern char** environ;

namespace dcomm::run {
namespace {

std::string name_of(const std::string& entry) { return entry.substr(0, entry.find('=')); }

}  // namespace

std::vector<std::string> rank_variables(const LaunchOptions& o, const RoundInfo& round, int local_rank) {
  const int rank = global_rank(o, local_rank);
  // Each value under torchrun's name (which dcomm::init() also reads) and dcomm's (which takes precedence).
  struct Variable {
    const char* torch_name;
    const char* dcomm_name;
    std::string value;
  };
  const Variable table[] = {
      {"RANK", "DCOMM_RANK", std::to_string(rank)},
      {"WORLD_SIZE", "DCOMM_WORLD_SIZE", std::to_string(o.world_size())},
      {"LOCAL_RANK", "DCOMM_LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", "DCOMM_LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"NODE_RANK", "DCOMM_NODE_RANK", std::to_string(o.node_rank)},
      {"GROUP_RANK", nullptr, std::to_string(o.node_rank)},
      {nullptr, "DCOMM_NODE_COUNT", std::to_string(o.nnodes)},
      {"MASTER_ADDR", "DCOMM_MASTER_ADDR", round.master_addr},
      {nullptr, "DCOMM_MASTER_PORT", std::to_string(round.master_port)},
      // torch's env:// has rank 0 host a TCPStore at MASTER_PORT: a port of its own, not dcomm's store.
      {"MASTER_PORT", nullptr, std::to_string(round.torch_port)},
      {nullptr, "DCOMM_RESTART_COUNT", std::to_string(round.restart_count)},
      {"TORCHELASTIC_RESTART_COUNT", nullptr,
       std::to_string(round.restarts_used >= 0 ? round.restarts_used : round.restart_count)},
      {nullptr, "DCOMM_RUN_ID", round.run_id},
  };
  std::vector<std::pair<const char*, std::string>> vars;
  for (const auto& v : table) {
    if (v.torch_name != nullptr) vars.emplace_back(v.torch_name, v.value);
    if (v.dcomm_name != nullptr) vars.emplace_back(v.dcomm_name, v.value);
  }
  // Always set, so a value inherited from an outer launch cannot mislead the ranks.
  vars.emplace_back("DCOMM_STORE_HOSTED", round.store_hosted ? "1" : "0");
  if (!o.host_id.empty()) vars.emplace_back("DCOMM_HOST_ID", o.host_id);
  // In the environment, never on a command line: ps shows command lines to every user, environments to none.
  if (!round.store_secret.empty()) vars.emplace_back("DCOMM_STORE_SECRET", round.store_secret);
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (const auto& [name, value] : vars) out.push_back(fmt::format("{}={}", name, value));
  // A terminal sees progress bars through the launcher's status line (status_line.hpp).
  out.push_back(fmt::format("DCOMM_RUN_TTY={}", StatusLine::enabled() ? 1 : 0));
  for (const auto& [name, value] : torchelastic_variables(o, round, local_rank)) {
    out.push_back(fmt::format("{}={}", name, value));
  }
  return out;
}

std::vector<std::string> merge_environment(const std::vector<std::string>& base,
                                           const std::vector<std::string>& overrides) {
  std::unordered_set<std::string> replaced;
  for (const auto& e : overrides) replaced.insert(name_of(e));
  std::vector<std::string> out;
  out.reserve(base.size() + overrides.size());
  for (const auto& e : base) {
    if (replaced.count(name_of(e)) == 0) out.push_back(e);
  }
  out.insert(out.end(), overrides.begin(), overrides.end());
  return out;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

}  // namespace dcomm::run
