#pragma once
// The environment each rank starts with: the launcher's own, with the rank's identity and the store's address
// set in torchrun's names and in dcomm's (see docs/launcher.md for the list).

#include <string>
#include <vector>

#include "tools/run/options.hpp"

namespace dcomm::run {

/// What one round of one launch shares across its ranks.
struct RoundInfo {
  std::string run_id;         ///< unique per launch, the same on every node
  /// 0 for the first round, then 1, 2, ... (DCOMM_RESTART_COUNT: the ranks' store keys live under
  /// "<run id>/<restart_count>/", so it grows with every round, an elastic re-rendezvous included)
  int restart_count = 0;
  std::string master_addr;    ///< where the ranks reach the store
  int master_port = 0;        ///< dcomm's store (DCOMM_MASTER_PORT)
  bool store_hosted = false;  ///< a store already runs there (ranks only connect)
  std::string store_secret;   ///< the store's secret (DCOMM_STORE_SECRET), empty for none
  /// MASTER_PORT: where rank 0 of a torch program hosts torch's own store (env://), which cannot share dcomm's.
  int torch_port = 0;
  /// TORCHELASTIC_RESTART_COUNT: the restarts used (as torchrun counts: an elastic re-rendezvous that admits a
  /// new node uses none); -1: restart_count.
  int restarts_used = -1;
};

/// The global rank of local rank `local_rank` on this node.
inline int global_rank(const LaunchOptions& o, int local_rank) { return o.node_rank * o.nproc_per_node + local_rank; }

/// The variables dcomm-run sets for one rank, as NAME=value.
std::vector<std::string> rank_variables(const LaunchOptions& o, const RoundInfo& round, int local_rank);

/// `base` (NAME=value entries, e.g. environ) with every variable of `overrides` replaced or added.
std::vector<std::string> merge_environment(const std::vector<std::string>& base,
                                           const std::vector<std::string>& overrides);

/// The launcher's own environment as NAME=value entries.
std::vector<std::string> current_environment();

}  // namespace dcomm::run
