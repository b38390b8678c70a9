#pragma once
// Measured choices (DCOMM_RULES_FILE): which algorithm runs a collective of a size range on a group of a size,
// written by `dcomm-bench --algo all --rules-out FILE` from the fastest row it measured at each size. Where the
// cost model's prices do not hold (ranks sharing cores, an unusual machine), measuring every row once gives choices
// that are right for that machine, like OpenMPI's dynamic rules file or a NCCL tuner; the selector takes a rule
// before the model (after a name the call gives, set_algorithm and DCOMM_ALGO), and explain() says so.
//
//   {"rules": [{"collective": "all_reduce", "ranks": 3, "min_bytes": 0, "max_bytes": 131072,
//               "algorithm": "shm_direct"}, ...]}
//
// bytes are the model's n (docs/algorithms.md: the full result of an all_reduce, what an all_gather gathers);
// min_bytes inclusive, max_bytes exclusive (absent: no upper bound); ranks 0 or absent: any group size. The first
// rule that matches a call (its collective, group size, n, and "device": true for calls on device buffers, else
// host ones) wins; a rule whose algorithm cannot run the call (a
// v-variant, device buffers) leaves the choice to the model. Every rank must read the same file: a rank whose
// rules differ picks differently, and the call check then fails the call on every rank, naming both algorithms.

#include <cstdint>
#include <string>
#include <vector>

#include <dcomm/process_group.hpp>

namespace dcomm::coll {

struct Rule {
  Collective coll{};
  int ranks = 0;  ///< 0: any group size
  uint64_t min_bytes = 0;
  uint64_t max_bytes = UINT64_MAX;
  std::string algorithm;
  bool device = false;  ///< for calls on device buffers (measured with dcomm-bench --device cuda), else host ones
};

/// Throws InvalidUsageError naming the file and the bad rule (unreadable, not JSON, unknown collective or
/// algorithm, min_bytes >= max_bytes).
std::vector<Rule> load_rules(const std::string& path);
/// The rules' JSON (load_rules' format), for dcomm-bench to write.
std::string rules_json(const std::vector<Rule>& rules);
/// "all_reduce on 3 ranks, 16.0 KiB to 128.0 KiB: shm_direct".
std::string describe(const Rule& rule);
/// Whether `rule` covers a call of `coll` moving `bytes` (the model's n) on `ranks` ranks, on device buffers or not.
bool rule_matches(const Rule& rule, Collective coll, int ranks, double bytes, bool device);
/// The first rule for a call of `coll` moving `bytes` (the model's n) on `ranks` ranks, on device buffers or not;
/// null when none.
const Rule* find_rule(const std::vector<Rule>& rules, Collective coll, int ranks, double bytes, bool device);

}  // namespace dcomm::coll
