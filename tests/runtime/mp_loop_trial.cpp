// The loop trial in real processes (collectives/tuner.hpp, LoopTrial): with DCOMM_TUNE=on the group measures a
// class at its first call, then tries its choice against the runner-up on the class's calls 64-95. 110 calls of
// all_reduce and of all_gather (in place) of 64 KiB, inputs that differ per rank, call and index, each result checked
// against the serial one; then explain() must say what the trial did wherever the measurement found a runner-up within
// LoopTrial::kWithin (2x), and every rank must have kept the same row. Exit 0 only when nothing went wrong.
//   DCOMM_TUNE=on dcomm-run --nproc-per-node 3 -- mp_loop_trial

#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/runtime/mp_checks.hpp"

using namespace dcomm;

namespace {

constexpr uint64_t kCalls = 110;
constexpr std::size_t kFloats = 16384;  // 64 KiB

// Multiples of 1/8 in [-125, 125]: every sum over a few ranks is exact in float.
float value(int rank, uint64_t call, std::size_t i) {
  const uint64_t h = (static_cast<uint64_t>(rank) * 7919 + call * 104729 + i * 31) % 2001;
  return (static_cast<float>(h) - 1000.0f) / 8.0f;
}

// The seconds of "name 6.7 us" / "name 1.20 ms"; negative when the row has no time ("left out", "could not run").
double row_seconds(const std::string& row) {
  const std::size_t sp = row.find(' ');
  if (sp == std::string::npos) return -1;
  char* end = nullptr;
  const double t = std::strtod(row.c_str() + sp + 1, &end);
  if (end == row.c_str() + sp + 1) return -1;
  const std::string unit(end);
  if (unit.rfind(" us", 0) == 0) return t * 1e-6;
  if (unit.rfind(" ms", 0) == 0) return t * 1e-3;
  return -1;
}

// Whether the measurement that explain() shows found a row other than its choice within 2x of it: then the trial
// must have run (LoopTrial::kWithin).
bool trial_expected(const std::string& text, std::string* why) {
  const std::size_t c = text.find("choice: ");
  const std::size_t t = text.find("a call: ");
  if (c == std::string::npos || t == std::string::npos) {
    *why = "no measurement in explain";
    return false;
  }
  const std::string choice = text.substr(c + 8, text.find(' ', c + 8) - (c + 8));
  double chosen = -1, other = -1;
  std::size_t at = t + 8;
  while (at < text.size()) {
    std::size_t next = text.find(", ", at);
    const std::size_t stop = std::min(next == std::string::npos ? text.size() : next, text.find(';', at));
    const std::string row = text.substr(at, stop - at);
    const std::string name = row.substr(0, row.find(' '));
    const double s = row_seconds(row);
    if (name == choice) {
      chosen = s;
    } else if (other < 0 && s > 0) {
      other = s;  // the rows are listed fastest first: the first other timed row is the runner-up
    }
    if (next == std::string::npos || stop != next) break;
    at = next + 2;
  }
  *why = fmt::format("choice {} {:.2g} s, runner-up {:.2g} s", choice, chosen, other);
  return chosen > 0 && other > 0 && other <= 2.0 * chosen;
}

void check_class(ProcessGroup& pg, Collective coll, std::vector<std::string>& failures) {
  const int p = pg.size();
  const int me = pg.rank();
  for (uint64_t call = 0; call < kCalls; ++call) {
    if (coll == Collective::kAllReduce) {
      std::vector<float> x(kFloats);
      for (std::size_t i = 0; i < kFloats; ++i) x[i] = value(me, call, i);
      pg.all_reduce(Buffer(x.data(), kFloats))->wait();
      for (std::size_t i = 0; i < kFloats; ++i) {
        float want = 0;
        for (int q = 0; q < p; ++q) want += value(q, call, i);
        if (x[i] != want) {
          failures.push_back(fmt::format("all_reduce call {}: element {} is {}, want {}", call, i, x[i], want));
          break;
        }
      }
    } else {
      // In place: this rank's block at the output's start (as torch's and the tests' in-place all_gather).
      const std::size_t block = kFloats / static_cast<std::size_t>(p);
      std::vector<float> out(block * static_cast<std::size_t>(p), -1.0f);
      for (std::size_t i = 0; i < block; ++i) out[i] = value(me, call, i);
      pg.all_gather(Buffer(out.data(), block), Buffer(out.data(), out.size()))->wait();
      for (int q = 0; q < p; ++q) {
        for (std::size_t i = 0; i < block; ++i) {
          if (out[static_cast<std::size_t>(q) * block + i] != value(q, call, i)) {
            failures.push_back(fmt::format("all_gather call {}: block {} element {} is {}, want {}", call, q, i,
                                           out[static_cast<std::size_t>(q) * block + i], value(q, call, i)));
            q = p;
            break;
          }
        }
      }
    }
  }
  const std::string text = pg.explain(coll, kFloats * 4);
  std::string why;
  const bool expected = trial_expected(text, &why);
  const bool tried = text.find("then on this program's calls 64-95 of the class") != std::string::npos;
  if (expected != tried) {
    failures.push_back(fmt::format("{}: trial {} ({}): {}", to_string(coll), tried ? "ran" : "missing", why, text));
  }
  // Every rank kept the same row: its name's hash, gathered.
  const std::size_t c = text.find("choice: ");
  const std::string choice = c == std::string::npos ? "" : text.substr(c, text.find(' ', c + 8) - c);
  uint64_t h = 1469598103934665603ull;
  for (char ch : choice) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  std::vector<uint64_t> all(static_cast<std::size_t>(p));
  pg.all_gather(Buffer(&h, 1), Buffer(all.data(), all.size()))->wait();
  for (int q = 0; q < p; ++q) {
    if (all[static_cast<std::size_t>(q)] != h) {
      failures.push_back(fmt::format("{}: rank {} kept another row than this rank's {}", to_string(coll), q, choice));
    }
  }
}

void check_all_reduce(ProcessGroup& pg, std::vector<std::string>& failures) {
  check_class(pg, Collective::kAllReduce, failures);
}
void check_all_gather(ProcessGroup& pg, std::vector<std::string>& failures) {
  check_class(pg, Collective::kAllGather, failures);
}

}  // namespace

int main() { return test::run_checks_main("loop trial", {check_all_reduce, check_all_gather}); }
