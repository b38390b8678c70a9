#include "tools/run/torch_env.hpp"

namespace dcomm::run {

std::vector<std::pair<std::string, std::string>> torchelastic_variables(const LaunchOptions& o, const RoundInfo& round,
                                                                        int local_rank) {
  // dcomm-run runs one role, so a rank's role rank and role world size are its global ones.
  return {
      {"TORCHELASTIC_RUN_ID", o.torch.rdzv_id.empty() ? round.run_id : o.torch.rdzv_id},
      {"GROUP_WORLD_SIZE", std::to_string(o.nnodes)},
      {"ROLE_RANK", std::to_string(global_rank(o, local_rank))},
      {"ROLE_WORLD_SIZE", std::to_string(o.world_size())},
      {"ROLE_NAME", o.torch.role},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o.max_restarts)},
      // Python's spelling of a bool, as torchrun writes it: True when the launcher's store is the one to join.
      {"TORCHELASTIC_USE_AGENT_STORE", round.store_hosted ? "True" : "False"},
  };
}

}  // namespace dcomm::run
