#pragma once
// torchrun's per-rank log files (--log-dir, --redirects, --tee) and console filter (--local-ranks-filter):
//   <log-dir>/<run id>/attempt_<restart>/<local rank>/stdout.log and stderr.log
// where the run id is TORCHELASTIC_RUN_ID (--rdzv-id, or the launch's run id).

#include <string>

#include "tools/run/output_pump.hpp"
#include "tools/run/rank_env.hpp"

namespace dcomm::run {

/// The folder of one local rank's log files in one round.
std::string rank_log_folder(const LaunchOptions& o, const RoundInfo& round, int local_rank);

/// Makes the rank's folder and files when the options ask for files, and tells the forwarders what goes where.
/// Throws dcomm::SystemError naming the path that cannot be made.
void attach_rank_logs(const LaunchOptions& o, const RoundInfo& round, int local_rank, LineForwarder& out,
                      LineForwarder& err);

}  // namespace dcomm::run
