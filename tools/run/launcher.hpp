#pragma once
// The launch as a whole: rendezvous with the other nodes, the rounds of ranks (restarting on failure while
// restarts remain), and the final report. Returns dcomm-run's exit code (see summary.hpp).

#include "tools/run/options.hpp"
#include "tools/run/signals.hpp"

namespace dcomm::run {

int run_launcher(const LaunchOptions& options, SignalWatcher& signals);

}  // namespace dcomm::run
