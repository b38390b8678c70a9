#include "runtime/flight_recorder.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>
#include <type_traits>
#include <utility>

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
  size_ = static_cast<std::size_t>(n < 1 ? 1 : n);
  ring_ = std::make_unique<Slot[]>(size_);
}

static_assert(std::is_trivially_copyable_v<FlightRecorder::Entry> &&
                  sizeof(FlightRecorder::Entry) == sizeof(uint64_t) * 8,
              "an entry travels as words");

namespace {

// The state and end time an end word says, into `e` (a running entry has no end).
void read_end_word(uint64_t word, FlightRecorder::Entry& e) {
  if ((word & 3) == FlightRecorder::kEndRunning) {
    e.state = FlightRecorder::State::kRunning;
    e.end = {};
    return;
  }
  e.state = (word & 3) == FlightRecorder::kEndDone ? FlightRecorder::State::kDone : FlightRecorder::State::kFailed;
  e.end = Clock::time_point(Clock::duration(static_cast<Clock::rep>(word >> 2)));
}

}  // namespace

bool FlightRecorder::load(uint64_t index, Entry& out) const {
  const Slot& slot = ring_[index % size_];
  for (;;) {
    const uint64_t before = slot.stamp.load(std::memory_order_acquire);
    if (before % 2 != 0) {  // being written: the writer is a few stores from done
      std::this_thread::yield();
      continue;
    }
    const uint64_t held = slot.index.load(std::memory_order_relaxed);
    // The end word first, with acquire: end() writes it after the algorithm, so an ended entry read here has its
    // algorithm too. The two change outside the stamp (end()), each a whole word; the rest only under it.
    const uint64_t ended = slot.words[FlightRecorder::kEndWord].load(std::memory_order_acquire);
    uint64_t words[kWords];
    for (std::size_t w = 0; w < kWords; ++w) words[w] = slot.words[w].load(std::memory_order_relaxed);
#if defined(__SANITIZE_THREAD__)
    // As in under_stamp: a release read-modify-write (of nothing) keeps the words' reads before the stamp's second
    // read; the stamp is the writer's, so the const reader casts its constness away for it.
    if (const_cast<std::atomic<uint64_t>&>(slot.stamp).fetch_add(0, std::memory_order_acq_rel) != before) continue;
#else
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.stamp.load(std::memory_order_relaxed) != before) continue;
#endif
    if (held != index + 1) return false;  // replaced by a later entry, or never written
    std::memcpy(&out, words, sizeof out);
    read_end_word(ended, out);
    return true;
  }
}

FlightRecorder::Position FlightRecorder::position(Clock::time_point now) const {
  Position p;
  // The newest entry; should the group move on meanwhile (this runs on another thread), the one after it.
  for (;;) {
    const uint64_t recorded = recorded_.load(std::memory_order_acquire);
    if (recorded == 0) return p;
    if (load(recorded - 1, p.newest)) break;
  }
  p.any = true;
  p.in_call = p.newest.state == State::kRunning;
  p.for_time = std::chrono::duration_cast<Duration>(now - (p.in_call ? p.newest.start : p.newest.end));
  return p;
}

nlohmann::json FlightRecorder::to_json(Clock::time_point now) const {
  // Copied entry by entry, formatted after: the rank's next call never waits for a reader. An entry replaced while
  // this copies (the group ran on) is left out; the newest is always there.
  const char* running_algorithm = algorithm_.load(std::memory_order_relaxed);
  const uint64_t recorded = recorded_.load(std::memory_order_acquire);
  std::vector<Entry> ring;
  const uint64_t first = recorded > size_ ? recorded - size_ : 0;
  for (uint64_t i = first; i < recorded; ++i) {
    Entry e;
    if (load(i, e)) ring.push_back(e);
  }
  nlohmann::json entries = nlohmann::json::array();
  for (const Entry& e : ring) {
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
  bool in_call = !ring.empty() && ring.back().state == State::kRunning;
  double idle = !ring.empty() && !in_call ? seconds(now - ring.back().end) : 0.0;
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
