#pragma once
// The launch as a whole: rendezvous with the other nodes, the rounds of ranks (restarting on failure while
// restarts remain), and the final report. Returns dcomm-run's exit code (see summary.hpp).

#include <string>

#include "tools/run/node_link.hpp"
#include "tools/run/options.hpp"
#include "tools/run/signals.hpp"

namespace dcomm::run {

int run_launcher(const LaunchOptions& options, SignalWatcher& signals);

// Shared with the elastic agent (elastic_agent.hpp).

/// How long the store's host keeps it up, beyond the grace period, for the other launchers to read the outcome.
inline constexpr Duration kFinishBound = std::chrono::seconds(30);
std::string this_host();
/// 16 hex digits, unique per launch.
std::string new_run_id();
/// One line on stderr, flushed.
void print_line(const std::string& line);
/// Prints that dcomm-run received `sig` `when` and returns 128 + sig.
int interrupted(int sig, const char* when);
/// Tells the other nodes that this node's ranks could not start (`why`), so that they stop theirs instead of
/// waiting.
void report_cannot_start(const LaunchOptions& options, NodeLink& link, int round, const std::string& host,
                         const std::string& why);

}  // namespace dcomm::run
