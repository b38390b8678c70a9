#pragma once
// What dcomm-run keeps of torchrun's options that have no dcomm-run spelling of their own (torch_compat.hpp parses
// them; docs/launcher.md has the flag-by-flag table).

#include <map>
#include <set>
#include <string>

namespace dcomm::run {

/// A bit per standard stream, as torchrun's --redirects/--tee number them: 1 stdout, 2 stderr, 3 both.
inline constexpr int kStdoutBit = 1;
inline constexpr int kStderrBit = 2;

/// torchrun's stream choice: one value for every local rank ("3") or per local rank ("0:1,1:2", others none).
struct StreamSpec {
  int all = 0;
  std::map<int, int> per_rank;
  bool uniform = true;
  int of(int local_rank) const {
    if (uniform) return all;
    auto it = per_rank.find(local_rank);
    return it == per_rank.end() ? 0 : it->second;
  }
  bool any() const { return uniform ? all != 0 : !per_rank.empty(); }
};

struct TorchSettings {
  std::string role = "default";  ///< --role: ROLE_NAME
  std::string rdzv_id;           ///< --rdzv-id: TORCHELASTIC_RUN_ID (empty: the launch's run id)
  std::string rdzv_backend;      ///< --rdzv-backend as given (empty when not given)
  /// --log-dir; when only --redirects/--tee are given, main() makes a temporary one.
  std::string log_dir;
  StreamSpec redirects;  ///< streams written to the log files only
  StreamSpec tee;        ///< streams written to the log files and the console
  /// --local-ranks-filter: the local ranks whose output reaches the console; empty means all.
  std::set<int> console_ranks;

  /// The streams of a local rank written to files under log_dir.
  int file_streams(int local_rank) const {
    int bits = redirects.of(local_rank) | tee.of(local_rank);
    // --log-dir alone keeps a copy of both streams of every rank.
    if (!log_dir.empty() && !redirects.any() && !tee.any()) bits = kStdoutBit | kStderrBit;
    return bits;
  }
  /// The streams of a local rank kept off the console.
  int hidden_streams(int local_rank) const {
    int bits = redirects.of(local_rank);
    if (!console_ranks.empty() && console_ranks.count(local_rank) == 0) bits = kStdoutBit | kStderrBit;
    return bits;
  }
};

}  // namespace dcomm::run
