#pragma once
// The variables torchrun's agent sets beyond the identity that rank_env.cpp sets: programs written for torchrun
// (and torch.distributed's elastic helpers) read them.

#include <string>
#include <utility>
#include <vector>

#include "tools/run/rank_env.hpp"

namespace dcomm::run {

/// TORCHELASTIC_RUN_ID, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME, TORCHELASTIC_MAX_RESTARTS and
/// TORCHELASTIC_USE_AGENT_STORE for one rank, as (name, value).
std::vector<std::pair<std::string, std::string>> torchelastic_variables(const LaunchOptions& o, const RoundInfo& round,
                                                                        int local_rank);

}  // namespace dcomm::run
