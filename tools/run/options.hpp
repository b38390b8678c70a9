#pragma once
// dcomm-run's command line: what to launch, where the store lives, and how to supervise.

#include <stdexcept>
#include <string>
#include <vector>

#include <dcomm/types.hpp>

#include "tools/run/torch_settings.hpp"

namespace dcomm::run {

/// The port dcomm-run uses when several nodes meet and none is given (torchrun's default too).
inline constexpr int kDefaultMasterPort = 29500;

struct LaunchOptions {
  int nproc_per_node = 1;
  /// Nodes in the world; with --nnodes MIN:MAX (elastic, MIN < MAX) the most (MAX), and each round's own count is
  /// set per round (elastic_agent.hpp).
  int nnodes = 1;
  /// Elastic: the fewest nodes a round starts with (MIN of --nnodes MIN:MAX); 0 or nnodes when not elastic.
  int nnodes_min = 0;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  /// 0: pick a free port (single node only).
  int master_port = 0;
  /// Node 0's launcher hosts the store; false when --rdzv-endpoint names a store that already runs.
  bool host_store = true;
  bool standalone = false;
  int max_restarts = 0;
  /// --keep-going: a rank that dies does not stop the others (they shrink their group, runtime/shrink.cpp); the
  /// run succeeds when some rank finished with 0, and the summary lists the ranks lost and the shrinks.
  bool keep_going = false;
  Duration grace_period = std::chrono::seconds(5);
  /// After a rank fails, how long the others get to notice (their errors name the failed peer) and exit on their
  /// own before they are sent SIGTERM. 0: SIGTERM at once, as torchrun does.
  Duration failure_window = std::chrono::seconds(3);
  Duration rdzv_timeout = std::chrono::seconds(300);
  /// Node 0's launcher declares another node's launcher lost after this long without its heartbeat.
  Duration node_timeout = std::chrono::seconds(30);
  /// Elastic: once MIN nodes joined a round, how long it stays open for more (--rdzv-conf last_call_timeout).
  Duration last_call_timeout = std::chrono::seconds(30);
  /// Elastic: how often running agents look for an agent waiting to join (--monitor-interval).
  Duration monitor_interval = std::chrono::milliseconds(100);
  std::string host_id;
  bool prefix_output = true;
  TorchSettings torch;               ///< torchrun's options without a dcomm-run spelling (torch_compat.hpp)
  std::vector<std::string> command;  ///< the program and its arguments

  int world_size() const { return nnodes * nproc_per_node; }
  /// --nnodes MIN:MAX with MIN < MAX: node ranks are assigned at each rendezvous round (elastic_agent.hpp).
  bool elastic() const { return nnodes_min > 0 && nnodes_min < nnodes; }
  /// --nnodes as given: "2", or "1:4" when elastic.
  std::string nnodes_text() const;
};

/// A bad command line. main() prints it as one "dcomm-run: error: ..." line and exits 2.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& message) : std::runtime_error(message) {}
};

struct CommandLine {
  LaunchOptions options;
  bool show_help = false;
  std::string help;  ///< the usage text, when show_help
};

/// Parses and validates argv. Throws UsageError naming the bad option and value.
CommandLine parse_command_line(int argc, char** argv);

/// Splits "host:port" or "[v6addr]:port"; throws UsageError unless the port is 1..65535.
void parse_endpoint(const std::string& endpoint, std::string* host, int* port);

}  // namespace dcomm::run
