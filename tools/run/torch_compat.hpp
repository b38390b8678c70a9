#pragma once
// torchrun's vocabulary on dcomm-run's command line: the options whose torchrun syntax needs more than an int
// (--nnodes MIN:MAX, --nproc-per-node auto|cpu|gpu), torchrun's rendezvous, logging and Python options, and the
// program rewrite torchrun does (python3 -u script.py, -m module). docs/launcher.md has the flag-by-flag table.

#include <string>
#include <vector>

#include "tools/run/options.hpp"

namespace CLI {
class App;
}

namespace dcomm::run {

/// The port torchrun uses for --rdzv-endpoint when none is given.
inline constexpr int kTorchRdzvPort = 29400;

/// The raw strings, as typed.
struct TorchFlags {
  std::string nnodes = "1";
  std::string nproc_per_node;
  std::string rdzv_backend;
  std::string rdzv_id;
  std::string rdzv_conf;
  double monitor_interval_s = 0.1;
  std::string redirects;
  std::string tee;
  std::string log_dir;
  std::string local_ranks_filter;
  std::string role = "default";
  bool module = false;
  bool run_path = false;
  bool no_python = false;
};

/// Adds the options above (both spellings, --a-b and --a_b) to dcomm-run's parser.
void add_torch_flags(CLI::App& app, TorchFlags* flags);

/// Validates the flags and applies them to `o` (nnodes, nproc_per_node, rdzv_timeout from --rdzv-conf, the
/// torch settings, the command). Throws UsageError naming the flag, the value and what is accepted.
void apply_torch_flags(const TorchFlags& flags, LaunchOptions* o);

/// --nnodes as {MIN, MAX}: "2" or "2:2" -> {2, 2}; "1:4" -> {1, 4} (elastic). Throws UsageError for anything
/// else (0, MIN > MAX, "2:", "a:b").
std::pair<int, int> parse_nnodes(const std::string& text);
/// A count, or torchrun's "cpu" (cores this process may use), "gpu" (GPUs visible), "auto" (gpu if any, else cpu).
int parse_nproc_per_node(const std::string& text);
/// torchrun's --redirects/--tee value: "0".."3", or per local rank "0:1,2:3".
StreamSpec parse_streams(const char* flag, const std::string& text);

/// When --redirects/--tee ask for files and no --log-dir was given, makes a temporary folder (as torchrun does)
/// and returns a line telling the user where; otherwise "".
std::string prepare_log_dir(LaunchOptions* o);

}  // namespace dcomm::run
