#include "tools/run/summary.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "tools/run/signals.hpp"

namespace dcomm::run {

std::string describe_status(const RankExit& e) {
  if (e.signaled) return fmt::format("signal {} {}", e.code, describe_signal(e.code));
  return fmt::format("exit code {}", e.code);
}

std::string describe_exit(const RankExit& e) {
  if (e.rank < 0 && !e.note.empty()) {
    return fmt::format("dcomm-run on node {} (host {}) {}", e.node_rank, e.host, e.note);
  }
  if (e.rank < 0) {
    return fmt::format("dcomm-run on node {} (host {}, pid {}) received {}", e.node_rank, e.host, e.pid,
                       describe_status(e));
  }
  if (!e.stalled.empty()) {
    return fmt::format("rank {} (local rank {}, node {}, host {}, pid {}): {}", e.rank, e.local_rank, e.node_rank,
                       e.host, e.pid, e.stalled);
  }
  return fmt::format("rank {} (local rank {}, node {}, host {}, pid {}): {}", e.rank, e.local_rank, e.node_rank,
                     e.host, e.pid, describe_status(e));
}

std::string describe_failure_briefly(const RankExit& e) {
  if (e.rank < 0 && !e.note.empty()) return fmt::format("dcomm-run on node {} {}", e.node_rank, e.note);
  if (e.rank < 0) return fmt::format("dcomm-run on node {} received {}", e.node_rank, describe_status(e));
  if (!e.stalled.empty()) return fmt::format("rank {} stalled ({})", e.rank, e.stalled);
  return fmt::format("rank {} failed ({})", e.rank, describe_status(e));
}

int exit_code_for(const RankExit& first) {
  if (first.signaled) return kExitSignalBase + first.code;
  return first.rank < 0 ? kExitLauncherError : kExitRankFailed;
}

std::string format_failure_summary(const std::vector<RankExit>& failures, const std::vector<RankExit>& stopped,
                                   int world_size, const std::string& flight_report) {
  std::string out = fmt::format("dcomm-run: FAILED: {} of {} ranks failed; root cause first:\n", failures.size(),
                                world_size);
  for (std::size_t i = 0; i < failures.size(); ++i) {
    const RankExit& e = failures[i];
    out += fmt::format("dcomm-run:   [{}] {}\n", i + 1, describe_exit(e));
    if (e.stderr_tail.empty()) continue;
    out += fmt::format("dcomm-run:       last {} stderr lines of rank {}:\n", e.stderr_tail.size(), e.rank);
    for (const auto& line : e.stderr_tail) out += fmt::format("dcomm-run:         {}\n", line);
  }
  if (!stopped.empty()) {
    std::vector<int> sorted;
    for (const auto& e : stopped) sorted.push_back(e.rank);
    std::sort(sorted.begin(), sorted.end());
    std::string ranks;
    for (int r : sorted) ranks += fmt::format("{}{}", ranks.empty() ? "" : ", ", r);
    out += fmt::format("dcomm-run: stopped by dcomm-run after the failure: rank{} {}\n",
                       stopped.size() == 1 ? "" : "s", ranks);
  }
  if (!flight_report.empty()) out += fmt::format("dcomm-run: flight recorder: {}\n", flight_report);
  return out;
}

std::string encode_exit(const RankExit& e) {
  nlohmann::json j = {{"rank", e.rank},   {"local_rank", e.local_rank}, {"node_rank", e.node_rank},
                      {"host", e.host},   {"pid", e.pid},               {"signaled", e.signaled},
                      {"code", e.code},   {"stderr_tail", e.stderr_tail}, {"note", e.note},
                      {"stalled", e.stalled}, {"rejoin", e.rejoin}};
  return j.dump();
}

RankExit decode_exit(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  RankExit e;
  if (j.is_discarded() || !j.is_object()) {
    e.host = "unknown (unreadable failure record: " + text + ")";
    e.code = 1;
    return e;
  }
  e.rank = j.value("rank", -1);
  e.local_rank = j.value("local_rank", -1);
  e.node_rank = j.value("node_rank", -1);
  e.host = j.value("host", std::string("unknown"));
  e.pid = j.value("pid", -1);
  e.signaled = j.value("signaled", false);
  e.code = j.value("code", 1);
  e.stderr_tail = j.value("stderr_tail", std::vector<std::string>{});
  e.note = j.value("note", std::string());
  e.stalled = j.value("stalled", std::string());
  e.rejoin = j.value("rejoin", false);
  return e;
}

}  // namespace dcomm::run

namespace dcomm::run {

std::string format_keep_going_summary(const std::vector<RankExit>& lost, const std::vector<std::string>& shrinks,
                                      int world_size) {
  std::string out = fmt::format("dcomm-run: --keep-going: {} of {} rank(s) lost, the rest finished\n", lost.size(),
                                world_size);
  for (const auto& e : lost) out += fmt::format("dcomm-run:   lost {}\n", describe_exit(e));
  for (const auto& s : shrinks) out += fmt::format("dcomm-run:   {}\n", s);
  if (shrinks.empty()) out += "dcomm-run:   the group recorded no shrink (the program did not call shrink())\n";
  return out;
}

}  // namespace dcomm::run
