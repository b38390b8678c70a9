#include "runtime/flight_recorder.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <chrono>

#include "common/env.hpp"

namespace dcomm::runtime {
namespace {

constexpr long long kDefaultEntries = 64;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

const char* state_name(FlightRecorder::State s) {
  switch (s) {
    case FlightRecorder::State::kRunning: return "running";
    case FlightRecorder::State::kDone: return "done";
    case FlightRecorder::State::kFailed: return "failed";
  }
  return "?";
}

std::string hostname() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace

FlightRecorder::FlightRecorder(uint32_t context, std::vector<int> world_ranks)
    : context_(context), world_ranks_(std::move(world_ranks)) {
  long long n = env::get_int("DCOMM_FLIGHT_RECORDER_ENTRIES", kDefaultEntries);
  ring_.resize(static_cast<std::size_t>(n < 1 ? 1 : n));
}

void FlightRecorder::begin(uint64_t seq, Collective coll, DType dtype, std::size_t count, int root) {
  algorithm_.store(nullptr, std::memory_order_relaxed);
  std::lock_guard<SpinLock> lock(mu_);
  Entry& e = ring_[recorded_ % ring_.size()];
  // Timestamps from the coarse clock (common/deadline.hpp): reports print tenths of seconds; every call takes two.
  e = Entry{seq, coll, nullptr, dtype, count, root, State::kRunning, coarse_now(), {}};
  ++recorded_;
}

void FlightRecorder::end(bool ok) {
  std::lock_guard<SpinLock> lock(mu_);
  if (recorded_ == 0) return;
  Entry& e = ring_[(recorded_ - 1) % ring_.size()];
  e.algorithm = algorithm_.load(std::memory_order_relaxed);
  e.state = ok ? State::kDone : State::kFailed;
  e.end = coarse_now();
}

FlightRecorder::Position FlightRecorder::position(Clock::time_point now) const {
  std::lock_guard<SpinLock> lock(mu_);
  Position p;
  if (recorded_ == 0) return p;
  p.any = true;
  p.newest = ring_[(recorded_ - 1) % ring_.size()];
  p.in_call = p.newest.state == State::kRunning;
  p.for_time = std::chrono::duration_cast<Duration>(now - (p.in_call ? p.newest.start : p.newest.end));
  return p;
}

nlohmann::json FlightRecorder::to_json(Clock::time_point now) const {
  // Copied under the lock, formatted after it: the rank's next call must not wait for the formatting.
  std::vector<Entry> ring;
  uint64_t recorded = 0;
  const char* running_algorithm = algorithm_.load(std::memory_order_relaxed);
  {
    std::lock_guard<SpinLock> lock(mu_);
    ring = ring_;
    recorded = recorded_;
  }
  nlohmann::json entries = nlohmann::json::array();
  uint64_t first = recorded > ring.size() ? recorded - ring.size() : 0;
  for (uint64_t i = first; i < recorded; ++i) {
    const Entry& e = ring[i % ring.size()];
    const char* algo = e.state == State::kRunning ? running_algorithm : e.algorithm;
    entries.push_back({{"seq", e.seq},
                       {"collective", to_string(e.coll)},
                       {"algorithm", algo != nullptr ? algo : ""},
                       {"dtype", to_string(e.dtype)},
                       {"count", e.count},
                       {"root", e.root},
                       {"state", state_name(e.state)},
                       {"started_s_ago", seconds(now - e.start)},
                       {"duration_s", seconds((e.state == State::kRunning ? now : e.end) - e.start)}});
  }
  bool in_call = recorded > 0 && ring[(recorded - 1) % ring.size()].state == State::kRunning;
  double idle = recorded > 0 && !in_call ? seconds(now - ring[(recorded - 1) % ring.size()].end) : 0.0;
  return {{"context", context_}, {"ranks", world_ranks_}, {"in_call", in_call}, {"idle_s", idle},
          {"entries", entries}};
}

std::shared_ptr<FlightRecorder> FlightRecorders::add(uint32_t context, std::vector<int> world_ranks) {
  auto r = std::make_shared<FlightRecorder>(context, std::move(world_ranks));
  std::lock_guard<std::mutex> lock(mu_);
  groups_.push_back(r);
  return r;
}

nlohmann::json FlightRecorders::dump(int rank, int world_size) const {
  auto now = Clock::now();
  nlohmann::json groups = nlohmann::json::array();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& g : groups_) groups.push_back(g->to_json(now));
  }
  auto wall = std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now());
  return {{"rank", rank},         {"world_size", world_size},       {"pid", static_cast<int>(::getpid())},
          {"host", hostname()},   {"time", fmt::format("{:%FT%TZ}", wall)}, {"groups", groups}};
}

std::string call_name(const nlohmann::json& e) {
  return fmt::format("{} #{}", e.value("collective", std::string("?")), e.value("seq", uint64_t{0}));
}

std::string dump_text(const nlohmann::json& d) {
  std::string out = fmt::format("dcomm flight recorder: rank {}/{} (pid {} on host {}) at {}\n", d.value("rank", -1),
                                d.value("world_size", 0), d.value("pid", 0), d.value("host", std::string()),
                                d.value("time", std::string()));
  for (const auto& g : d.value("groups", nlohmann::json::array())) {
    const auto& entries = g["entries"];
    std::string where = "has run no collective";
    if (!entries.empty()) {
      where = g.value("in_call", false)
                  ? fmt::format("in {} for {:.1f} s", call_name(entries.back()),
                                entries.back().value("duration_s", 0.0))
                  : fmt::format("last finished {}, in user code for {:.1f} s", call_name(entries.back()),
                                g.value("idle_s", 0.0));
    }
    out += fmt::format("  group {} (world ranks {}): {}\n", g.value("context", 0), g["ranks"].dump(), where);
    for (const auto& e : entries) {
      std::string algo = e.value("algorithm", std::string());
      out += fmt::format("    #{} {}{} {} x {} root {}: {} {:.3f} s, started {:.3f} s ago\n", e.value("seq", 0),
                         e.value("collective", std::string()), algo.empty() ? "" : "[" + algo + "]",
                         e.value("dtype", std::string()), e.value("count", 0), e.value("root", 0),
                         e.value("state", std::string()), e.value("duration_s", 0.0),
                         e.value("started_s_ago", 0.0));
    }
  }
  return out;
}

}  // namespace dcomm::runtime
