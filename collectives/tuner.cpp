// Choices measured online: see tuner.hpp.

#include "collectives/tuner.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dcomm/error.hpp>
#include <fstream>
#include <limits>
#include <mutex>
#include <new>
#include <typeinfo>
#include <utility>

#include "collectives/cost_model.hpp"
#include "collectives/registry.hpp"
#include "collectives/topology.hpp"
#include "collectives/window_probe.hpp"
#include "common/deadline.hpp"
#include "common/env.hpp"
#include "common/log.hpp"

namespace dcomm::coll {

namespace {

// Calls per algorithm and pass (timed together: a loop's pace), after the warm-up: more where calls are short
// (their noise is relatively larger, and a rooted message row reaches its pace in a loop only after a few calls:
// 2 ranks bound, gather of 64 KiB, linear measured 5.1-10.2 us a call in runs of 4 calls, 3.7-4.1 in runs of 16,
// 3.1-3.6 in a loop of 100), fewer where one call of a slow row takes tens of milliseconds.
int timed_calls(double n) {
  if (n <= double(256 << 10)) return 16;
  if (n <= double(4 << 20)) return 3;
  return 2;
}

std::string seconds_text(double s) {
  if (!std::isfinite(s)) return "could not run";
  if (s < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  return fmt::format("{:.2f} ms", s * 1e3);
}

// Memory for one buffer of the measurement, zeroed (any value does: no algorithm's time depends on the data), at
// the same offset within a page as the caller's buffer `like`: a single copy's system call pins and copies page by
// page, and a buffer 16 bytes into its page (malloc's, above its mmap threshold) read 32 KiB in 2.09 us against 1.65
// page-aligned. The tuner's own malloc'd buffers (16 bytes in) measured all_to_all[cma] of 64 KiB at 4.4-4.7 us a
// call against 3.9-4.3 page-aligned, as dcomm-bench's buffers are.
struct Block {
  static constexpr std::size_t kPage = 4096;
  char* base = nullptr;
  std::size_t offset = 0;
  Block(std::size_t n, const void* like) : offset(reinterpret_cast<uintptr_t>(like) % kPage) {
    const std::size_t bytes = std::max(kPage, (offset + n + kPage - 1) / kPage * kPage);
    base = static_cast<char*>(std::aligned_alloc(kPage, bytes));
    if (base == nullptr) throw std::bad_alloc();
    std::memset(base, 0, bytes);
  }
  ~Block() { std::free(base); }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  void* data() const { return base + offset; }
};

// An all_reduce in place of `values` with `op` through the group (the group's own choice of algorithm): every
// rank then holds the same numbers. A few bytes (8 a row), below kTuneMinBytes, so the call is never measured.
void agree(const TuneCall& run, Buffer values, ReduceOp op) {
  Args a;
  a.coll = Collective::kAllReduce;
  a.red.op = op;
  a.send = a.recv = values;
  run(a, "");
}

}  // namespace

int window_rule_set(const Topology& t) {
  if (!t.cached_windows) return kNonTemporalRuleSet;
  return windows_cross_slowly(t.window_small_seconds_per_byte) ? kSlowLinesRuleSet : kDefaultRuleSet;
}

double window_tune_max_bytes(int set, Collective c) {
  if (set == kSlowLinesRuleSet) return rooted(c) ? kTuneSlowLinesMaxBytes : std::numeric_limits<double>::infinity();
  return set == kNonTemporalRuleSet && !rooted(c) ? kTuneNonTemporalMaxBytes : kTuneWindowsMaxBytes;
}

TuneMode tune_mode_from_env() {
  const std::string v = env::get("DCOMM_TUNE").value_or("auto");
  if (v == "auto" || v.empty()) return TuneMode::kAuto;
  if (v == "on" || v == "1") return TuneMode::kOn;
  if (v == "off" || v == "0") return TuneMode::kOff;
  throw InvalidUsageError(fmt::format("DCOMM_TUNE='{}': expected off, on or auto (on where the group's ranks share "
                                      "cores, the default)",
                                      v));
}

int tune_class(const Args& args, int group_size) {
  if (args.vector_variant || args.red.op == ReduceOp::kPreMulSum || on_device(args)) return -1;
  if (args.coll == Collective::kBarrier) return -1;
  const double n = model_bytes(args, group_size);
  if (n < kTuneMinBytes || n > kTuneMaxBytes) return -1;
  return static_cast<int>(std::floor(std::log2(n)));
}

uint64_t tuned_class_end(int cls) {
  const uint64_t end = uint64_t{1} << (cls + 1);
  return static_cast<double>(end) > kTuneMaxBytes ? UINT64_MAX : end;
}

Rule class_rule(Collective c, int ranks, int cls, std::string algorithm) {
  Rule rule;
  rule.coll = c;
  rule.ranks = ranks;
  rule.min_bytes = uint64_t{1} << cls;
  rule.max_bytes = tuned_class_end(cls);
  rule.algorithm = std::move(algorithm);
  return rule;
}

void save_learned(const std::string& path, const std::vector<Rule>& learned) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::vector<Rule> rules;
  if (std::ifstream(path).good()) {
    try {
      rules = load_rules(path);
    } catch (const Error& e) {
      DCOMM_WARN("DCOMM_TUNE_OUT={}: the file is not a rules file, so it is written anew ({})", path, e.what());
    }
  }
  auto same = [](const Rule& x, const Rule& y) {
    return x.coll == y.coll && x.ranks == y.ranks && x.min_bytes == y.min_bytes && x.max_bytes == y.max_bytes &&
           x.device == y.device;
  };
  for (const Rule& r : learned) {
    std::erase_if(rules, [&](const Rule& old) { return same(old, r); });
    rules.push_back(r);
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << rules_json(rules);
    if (!out.flush()) {
      DCOMM_WARN("DCOMM_TUNE_OUT={}: cannot write {} ({}); the learned rules are not saved", path, tmp,
                 std::strerror(errno));
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    DCOMM_WARN("DCOMM_TUNE_OUT={}: cannot rename {} to it ({}); the learned rules are not saved", path, tmp,
               std::strerror(errno));
    std::remove(tmp.c_str());
  }
}

void rethrow_prefixed(const Error& e, const std::string& prefix) {
  const std::string m = prefix + e.what();
  if (dynamic_cast<const ExcludedError*>(&e) != nullptr) throw ExcludedError(m);
  if (dynamic_cast<const AbortedError*>(&e) != nullptr) throw AbortedError(m);
  if (dynamic_cast<const TimeoutError*>(&e) != nullptr) throw TimeoutError(m);
  if (dynamic_cast<const RemoteError*>(&e) != nullptr) throw RemoteError(m);
  if (dynamic_cast<const InvalidUsageError*>(&e) != nullptr) throw InvalidUsageError(m);
  if (typeid(e) == typeid(Error)) throw Error(e.code(), m);
  throw;  // NOLINT: SystemError and others keep their own type and message
}

std::size_t pick_measured(const std::vector<double>& seconds, std::size_t model, double margin) {
  std::size_t best = model < seconds.size() ? model : 0;
  for (std::size_t i = 0; i < seconds.size(); ++i) {
    if (seconds[i] < seconds[best]) best = i;
  }
  if (!std::isfinite(seconds[best])) return best;
  if (model < seconds.size() && seconds[model] <= seconds[best] * (1.0 + margin)) return model;
  // Among rows about as fast as the fastest (within the margin), the first in the table: two runs that measure two
  // such rows in either order still choose alike.
  for (std::size_t i = 0; i < seconds.size(); ++i) {
    if (seconds[i] <= seconds[best] * (1.0 + margin)) return i;
  }
  return best;
}

int LoopTrial::next_row() {
  const uint64_t call = calls_++;
  if (call < kStartAfter || call >= kStartAfter + kBlock * kBlocks) return -1;
  return static_cast<int>((call - kStartAfter) / kBlock % 2);
}

void LoopTrial::record(int row, double seconds) {
  const uint64_t at = (calls_ - 1 - kStartAfter) % kBlock;  // the call's place in its block
  if (at == 0) {
    block_seconds_ = 0;  // a block's first call pays for the switch of rows: untimed
    return;
  }
  block_seconds_ += seconds;  // NaN (a call that ran the other row: engine_tuning.cpp) spoils its block
  if (at + 1 < kBlock) return;
  const double pace = block_seconds_ / (kBlock - 1);
  if (std::isfinite(pace) && (best_[row] < 0 || pace < best_[row])) best_[row] = pace;
}

std::vector<double> LoopTrial::paces() const {
  std::vector<double> out(2);
  for (int i = 0; i < 2; ++i) out[i] = best_[i] < 0 ? std::numeric_limits<double>::infinity() : best_[i];
  return out;
}

int LoopTrial::keep(const std::vector<double>& agreed) const {
  return agreed.size() == 2 && std::isfinite(agreed[1]) && agreed[1] * (1.0 + margin_) < agreed[0] ? 1 : 0;
}

std::string LoopTrial::describe(const std::vector<double>& agreed, int keep) const {
  return fmt::format("{}{}then on this program's calls {}-{} of the class, {} blocks of {} alternating, the slowest "
                     "rank's better block, a call: {} {}, {} {}: {}",
                     measured_, measured_.empty() ? "" : "; ", kStartAfter, kStartAfter + kBlock * kBlocks - 1,
                     kBlocks, kBlock, names_[0], seconds_text(agreed[0]), names_[1], seconds_text(agreed[1]),
                     keep == 1 ? fmt::format("{} replaces {}", names_[1], names_[0])
                               : fmt::format("{} kept (the other not faster by {:.0f}%)", names_[0], 100 * margin_));
}

TuneResult measure_algorithms(const Args& call, const GroupView& view, const Algorithm& model, uint64_t seq,
                              const TuneCall& run) {
  std::vector<const Algorithm*> candidates;
  std::size_t model_index = SIZE_MAX;  // none: the model's row is not among them
  for (const Algorithm* a : algorithms_for(call.coll)) {
    if (a->by_name_only || !a->supports(call, view)) continue;
    if (a == &model) model_index = candidates.size();
    candidates.push_back(a);
  }
  if (candidates.size() < 2) return {};
  // The call's shape on memory of the measurement's own: in place where the call is.
  Args a;
  a.coll = call.coll;
  a.red = call.red;
  a.root = call.root;
  int ok = 1;
  const bool in_place = call.send.data == call.recv.data;
  std::unique_ptr<Block> send, recv;
  try {
    // In place, both views share one block as large as the larger (an all_gather's input lies inside its output).
    send = std::make_unique<Block>(in_place ? std::max(call.send.bytes(), call.recv.bytes()) : call.send.bytes(),
                                   call.send.data != nullptr ? call.send.data : call.recv.data);
    if (!in_place) recv = std::make_unique<Block>(call.recv.bytes(), call.recv.data);
  } catch (const std::bad_alloc&) {
    ok = 0;
  }
  if (ok != 0) {
    // A buffer the call leaves null (a non-root's side of a rooted call) stays null.
    auto like = [](const Buffer& b, const Block* block) {
      return Buffer(b.data == nullptr ? nullptr : block->data(), b.count, b.dtype);
    };
    a.send = like(call.send, send.get());
    a.recv = like(call.recv, in_place ? send.get() : recv.get());
  }
  // Every rank has the memory, or none measures (a rank alone failing would leave the others waiting).
  agree(run, Buffer(&ok, 1), ReduceOp::kMin);
  if (ok == 0) return {};

  const std::size_t rows = candidates.size();
  std::vector<bool> runs(rows, true);
  auto timed_call = [&](std::size_t i) {
    const auto t0 = std::chrono::steady_clock::now();
    run(a, candidates[i]->name);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // Warm-up: three calls of each row (six up to 256 KiB, below), the faster of the last two timed (a row's first
  // call makes its scratch and windows, which can take 100x a small call, and all_gather[shm_rounds] at 1 MiB on 2
  // ranks took ~950, ~190, then ~60 us a call), or from 16 MiB one call (there the call outweighs the setup); the
  // slowest rank's times agreed, and a row slower than 3x the fastest (2x from 16 MiB, where one call's time varies less) is measured no
  // further: a 64 MiB all_reduce on 4 ranks sharing 2 cores spent 3.7 s measuring every row fully. Below 2 MiB
  // where ranks share cores (`shared_small`), 10x: there one call's time says little of a row's time in a loop (a
  // call waits for its ranks' turns on their cores): 4 ranks on 2 cores, single calls of reduce at 256 KiB took
  // 100-260 us by every row and OpenMPI alike, where reduce[shm_pipe] took 55 us a call in a loop - pruned at 3x
  // (238 us warm against shm_direct's 69), as was all_to_all[shm_direct] at 1 MiB (660 against 182; 118-129 a call
  // in a loop, the fastest row). Only below 2 MiB, where measuring every row 4x as often (below) costs tens of
  // milliseconds: a measurement's calls each have the call's timeout, so a rank stopped during a long one fails
  // the call that much later than its timeout.
  const double n = model_bytes(call, view.size);
  const bool large = n >= double(16 << 20);
  const bool shared_small = view.hierarchy && view.hierarchy->topo.shares_cores && n < double(2 << 20);
  const double kPruneFactor = large ? 2.0 : shared_small ? 10.0 : 3.0;
  std::vector<double> warm(rows, std::numeric_limits<double>::infinity());
  // Short calls (up to 256 KiB: microseconds) warm up with 6 calls, the fastest of the last 5: a row's first calls
  // also run its transport's first messages of a size class (shm tries single copies and streams in turns, each
  // kTriesEach times, ProtocolHistory), and with 3, scatter[linear] of 64 KiB on 2 ranks bound was once left out at
  // 28.8 us warm (3.8-4.8 us a call measured in 11 other runs).
  const int warm_calls = large ? 1 : n <= double(256 << 10) ? 6 : 3;
  for (std::size_t i = 0; i < rows; ++i) {
    try {
      for (int k = 0; k < warm_calls; ++k) {
        const double t = timed_call(i);
        if (k > 0 || warm_calls == 1) warm[i] = std::min(warm[i], t);  // the first call untimed, unless alone
      }
    } catch (const InvalidUsageError&) {
      // Raised on every rank alike by the call check (a limit of the row that supports() does not see): the row
      // stays unmeasured, at infinity, everywhere. A peer's failure or a timeout goes up to the caller.
      runs[i] = false;
    }
  }
  agree(run, Buffer(warm.data(), warm.size()), ReduceOp::kMax);
  const double fastest_warm = *std::min_element(warm.begin(), warm.end());
  for (std::size_t i = 0; i < rows; ++i) {
    if (!(warm[i] <= kPruneFactor * fastest_warm)) runs[i] = false;
  }
  // Each row left runs as a program calls it, several calls in a row (a rooted row's senders run ahead of its root
  // across calls; alternating rows call by call hid that and chose rows 2x slower in a loop), in two passes over
  // the rows, so that a burst of noise on the machine costs every row alike rather than all of one row's calls.
  // With `shared_small`, 4x the calls: a row's calls there reach their pace in a loop only after several calls
  // (senders run ahead by their slots while their reader waits for its turn on the core), and the medians of 3-4
  // calls a pass ran 1.2-3x a loop's time a call for the pipes (4 ranks on 2 cores, session 17:
  // all_to_all[shm_direct] at 1 MiB 226 us against 116 in a loop, so cma, 161, was chosen; with 4x, 148 and chosen).
  // A pass times a row's calls together, from a start every rank leaves at once (an agreement), and takes their
  // time a call: a loop's pace, as a program's loop of calls sees it, not a call's latency. Timed one by one (the
  // median of single calls, before session 19), a rooted message row lost what a loop gives it, its senders
  // posting the next call's data while the root still copies the last: 2 ranks bound, gather of 64 KiB measured
  // linear 4.7-7.2 us a call against shm_direct's 5.9-6.0, where in a loop linear took 3.1-3.6 and shm_direct
  // 5.5-7.7, and shm_direct was taken in 1 of 3 runs.
  const int per_pass = shared_small ? std::max(timed_calls(n), 12) : timed_calls(n);
  std::vector<double> seconds(rows, std::numeric_limits<double>::infinity());
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i = 0; i < rows; ++i) {
      if (!runs[i]) continue;
      try {
        int start = 0;
        agree(run, Buffer(&start, 1), ReduceOp::kMax);
        const auto t0 = std::chrono::steady_clock::now();
        for (int k = 0; k < per_pass; ++k) run(a, candidates[i]->name);
        const double pace = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / per_pass;
        seconds[i] = std::min(seconds[i], pace);
      } catch (const InvalidUsageError&) {
        runs[i] = false;  // as in the warm-up: every rank alike
        seconds[i] = std::numeric_limits<double>::infinity();
      }
    }
  }
  // The slowest rank's better pass is the row's time; every rank then holds the same numbers and picks alike.
  agree(run, Buffer(seconds.data(), seconds.size()), ReduceOp::kMax);  // infinity survives max
  // Where ranks share cores, rows within 10% of each other here differed by 17-40% in a loop, and the model, on
  // built-in parameters there, kept the slower (3 ranks on 2 cores, reduce: shm_pipe kept at 256 KiB and 16 MiB,
  // measured 4.9% and 7.6% behind cma, 50-57 us against 43-51 and 5.43-5.46 ms against 4.64 in a loop; 4 ranks:
  // scatter[shm_direct] kept at 64 KiB 3.2% behind linear, 10.9-11.2 us against 7.4-7.9; all_gather[shm_direct]
  // at 4 MiB 8.5% behind, 894-939 us against cma's 748-805): a narrower margin there.
  const double margin = view.hierarchy && view.hierarchy->topo.shares_cores ? kSharedCoresTieMargin : kTieMargin;
  const std::size_t chosen = pick_measured(seconds, model_index, margin);
  if (!std::isfinite(seconds[chosen])) return {};
  std::vector<std::size_t> order(rows);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return seconds[x] < seconds[y]; });
  std::string table;
  for (std::size_t i : order) {
    const bool left_out = std::isfinite(warm[i]) && !std::isfinite(seconds[i]);
    table += fmt::format("{}{} {}", table.empty() ? "" : ", ", candidates[i]->name,
                         left_out ? fmt::format("left out ({} warm)", seconds_text(warm[i])) : seconds_text(seconds[i]));
  }
  TuneResult r;
  r.algorithm = candidates[chosen]->name;
  for (std::size_t i : order) {  // the fastest other row, to try on the program's calls (LoopTrial)
    if (i == chosen) continue;
    if (seconds[i] <= LoopTrial::kWithin * seconds[chosen]) r.runner_up = candidates[i]->name;
    break;
  }
  r.how = fmt::format("before call #{}, {} on {} ranks, the slowest rank's better of 2 runs of {} calls, a call: {}{}",
                      seq, format_bytes(static_cast<std::size_t>(model_bytes(call, view.size))), view.size, per_pass,
                      table,
                      chosen == model_index && order.front() != model_index
                          ? fmt::format(" ({} kept: within {:.0f}% of the fastest)", model.name, 100 * margin)
                          : std::string());
  return r;
}

}  // namespace dcomm::coll
