#include "runtime/hang_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "common/env.hpp"
#include "common/log.hpp"
#include "common/process.hpp"
#include "rendezvous/failure_record.hpp"

namespace dcomm::runtime {
namespace {

constexpr const char* kRequestKey = "fr/request";
constexpr const char* kReportKey = "fr/report";
/// How often a responder looks for a request, and how long the asker waits for the answers: short, because the
/// asker's timeout must still hold within a few percent.
/// The asker's error comes at most kGatherTime after its timeout (2.5% of a 10 s timeout).
constexpr Duration kPollInterval = std::chrono::milliseconds(50);
constexpr Duration kGatherTime = std::chrono::milliseconds(250);
constexpr Duration kGatherPoll = std::chrono::milliseconds(10);

std::string dump_key(int64_t request, int rank) { return fmt::format("fr/{}/{}", request, rank); }

void publish_dump(Store& store, const FlightRecorders& recorders, int64_t request, int rank, int world_size) {
  store.set(dump_key(request, rank), recorders.dump(rank, world_size).dump());
}

// What a rank's dump says of group `context`; null when it has no such group.
const nlohmann::json* find_group(const nlohmann::json& dump, uint32_t context) {
  for (const auto& g : dump["groups"]) {
    if (g.value("context", uint32_t{0}) == context) return &g;
  }
  return nullptr;
}

// Why rank r cannot answer, when dcomm-run or the process table knows it ("it is stopped ..."); empty otherwise.
std::string cannot_answer(Store& store, const transport::Mesh& mesh, int r) {
  const transport::PeerInfo& p = mesh.peer(r);
  try {
    std::string key = fmt::format("launcher/stopped/{}", r);
    if (store.check({key})) return fmt::format("it is {} (says dcomm-run)", store.get_string(key));
  } catch (const std::exception&) {
  }
  if (r == mesh.rank() || p.host_id != mesh.peer(mesh.rank()).host_id) return {};
  switch (local_process_state(p.pid)) {
    case ProcessState::kStopped: return "it is stopped (SIGSTOP or a debugger)";
    case ProcessState::kExited: return "it has exited";
    case ProcessState::kRunning: break;
  }
  return {};
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += fmt::format("{}{}", out.empty() ? "" : ", ", r);
  return out;
}

}  // namespace

HangResponder::HangResponder(std::shared_ptr<Store> store, std::shared_ptr<FlightRecorders> recorders, int rank,
                             int world_size)
    : store_(std::move(store)), recorders_(std::move(recorders)), rank_(rank), world_size_(world_size) {
  if (store_) thread_ = std::thread([this] { loop(); });
}

HangResponder::~HangResponder() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  dump_at_exit();
}

void HangResponder::loop() {
  int64_t answered = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, kPollInterval, [this] { return stop_; })) {
    lock.unlock();
    try {
      // check() first: add() would create the key, and a caller's store should not grow keys nobody asked for.
      int64_t request = store_->check({kRequestKey}) ? store_->add(kRequestKey, 0) : 0;
      // Several ranks may ask at once (their timeouts expire together): each gets an answer under its number.
      for (; answered < request; ++answered) publish_dump(*store_, *recorders_, answered + 1, rank_, world_size_);
    } catch (const std::exception& e) {
      // The store is gone (its host exited): nobody can ask any more.
      DCOMM_DEBUG("flight recorder: stops answering requests: {}", e.what());
      return;
    }
    lock.lock();
  }
}

void HangResponder::dump_at_exit() const noexcept {
  auto where = env::get("DCOMM_FLIGHT_RECORDER_DUMP");
  if (!where || where->empty()) return;
  try {
    nlohmann::json d = recorders_->dump(rank_, world_size_);
    if (*where == "stderr") {
      std::fputs(dump_text(d).c_str(), stderr);
      return;
    }
    // One file per rank: "<path>.<rank>", text, or JSON when the path ends in .json.
    std::string path = *where;
    bool json = path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0;
    if (json) path.insert(path.size() - 5, fmt::format(".{}", rank_));
    else path += fmt::format(".{}", rank_);
    std::ofstream out(path);
    out << (json ? d.dump(2) + "\n" : dump_text(d));
  } catch (const std::exception& e) {
    DCOMM_WARN("flight recorder: could not write the dump to {}: {}", *where, e.what());
  }
}

std::string published_report(Store& store) noexcept {
  try {
    if (store.check({kReportKey})) return store.get_string(kReportKey);
  } catch (const std::exception&) {
  }
  return {};
}

std::string report_hang(Store& store, const FlightRecorders& recorders, const FlightRecorder& group,
                        const transport::Mesh& mesh, uint64_t seq) noexcept {
  try {
    if (std::string earlier = published_report(store); !earlier.empty()) return earlier;
    const int self = mesh.rank();
    int64_t request = store.add(kRequestKey, 1);
    publish_dump(store, recorders, request, self, mesh.size());
    // Wait for the answers of the ranks that can give one; a stopped or dead rank is not waited for.
    std::vector<std::string> unable(static_cast<std::size_t>(mesh.size()));
    std::vector<std::string> keys;
    for (int r : group.world_ranks()) {
      unable[static_cast<std::size_t>(r)] = cannot_answer(store, mesh, r);
      if (unable[static_cast<std::size_t>(r)].empty()) keys.push_back(dump_key(request, r));
    }
    // Polled, not a blocking wait: the store client is this process's responder's too, and another asker may
    // be waiting for it to answer.
    Deadline gather = Deadline::after(kGatherTime);
    while (!keys.empty() && !gather.expired()) {
      std::erase_if(keys, [&](const std::string& k) { return store.check({k}); });
      if (!keys.empty()) std::this_thread::sleep_for(kGatherPoll);
    }
    std::vector<int> in_call;
    std::vector<std::pair<std::string, std::vector<int>>> other_calls;  // another call of the group, and its ranks
    std::vector<std::string> elsewhere;
    // The rank that holds up the call, by how sure the report is: one known stopped or dead, else one silent,
    // else one in user code, else one in another call.
    int culprit = -1, culprit_rank_order = 4;
    std::string culprit_what;
    auto suspect = [&](int r, int order, const std::string& what) {
      if (order < culprit_rank_order) culprit = r, culprit_rank_order = order, culprit_what = what;
    };
    FlightRecorder::Position mine = group.position(Clock::now());
    std::string call = fmt::format("{} #{} for {:.1f} s", to_string(mine.newest.coll), seq,
                                   std::chrono::duration<double>(mine.for_time).count());
    for (int r : group.world_ranks()) {
      std::string key = dump_key(request, r);
      if (!store.check({key})) {
        std::string why = unable[static_cast<std::size_t>(r)];
        why = why.empty() ? fmt::format("did not answer within {}: it is stuck outside dcomm or cannot reach the store",
                                        format_duration(kGatherTime))
                          : "did not answer: " + why;
        elsewhere.push_back(fmt::format("rank {} (pid {} on host {}) {}", r, mesh.peer(r).pid, mesh.peer(r).hostname,
                                        why));
        suspect(r, unable[static_cast<std::size_t>(r)].empty() ? 1 : 0, why);
        continue;
      }
      nlohmann::json d = nlohmann::json::parse(store.get_string(key), nullptr, false);
      const nlohmann::json* g = d.is_discarded() ? nullptr : find_group(d, group.context());
      const nlohmann::json* newest = g != nullptr && !(*g)["entries"].empty() ? &(*g)["entries"].back() : nullptr;
      if (g != nullptr && g->value("in_call", false) && newest != nullptr && newest->value("seq", uint64_t{0}) == seq) {
        in_call.push_back(r);
        continue;
      }
      std::string what;
      int order = 2;
      if (newest == nullptr) {
        what = "has run no collective in this group";
      } else if (g->value("in_call", false)) {
        // Grouped by call below: "ranks 0, 2 are in all_reduce #43 for 8.0 s".
        std::string other = fmt::format("{} for {:.1f} s", call_name(*newest), newest->value("duration_s", 0.0));
        auto same = std::find_if(other_calls.begin(), other_calls.end(), [&](const auto& c) {
          return c.first.substr(0, c.first.find(" for ")) == other.substr(0, other.find(" for "));
        });
        if (same == other_calls.end()) other_calls.emplace_back(other, std::vector<int>{r});
        else same->second.push_back(r);
        suspect(r, 3, "is in " + other);
        continue;
      } else {
        what = fmt::format("last finished {} and is in user code for {:.1f} s", call_name(*newest),
                           g->value("idle_s", 0.0));
      }
      elsewhere.push_back(fmt::format("rank {} {}", r, what));
      suspect(r, order, what);
    }
    std::string report;
    auto in = [](const std::vector<int>& ranks, const std::string& where) {
      return fmt::format("rank{} {} {} in {}", ranks.size() == 1 ? "" : "s", join_ranks(ranks),
                         ranks.size() == 1 ? "is" : "are", where);
    };
    if (!in_call.empty()) report = in(in_call, call);
    for (const auto& [where, ranks] : other_calls) report += (report.empty() ? "" : "; ") + in(ranks, where);
    for (const auto& e : elsewhere) report += (report.empty() ? "" : "; ") + e;
    if (culprit < 0) {
      report += "; every rank is in this call: none is missing (a transport stalled, or the calls differ)";
    } else {
      report += fmt::format("; rank {} holds up the call", culprit);
    }
    std::string held = report;
    Store::Bytes after = store.compare_set(kReportKey, {}, Store::Bytes(held.begin(), held.end()));
    report = std::string(after.begin(), after.end());
    if (culprit >= 0) {
      rdzv::FailureRecord rec;
      rec.rank = culprit;
      rec.pid = mesh.peer(culprit).pid;
      rec.host = mesh.peer(culprit).hostname;
      rec.what = fmt::format("held up {} (its peers timed out in it): it {}", call.substr(0, call.find(" for ")),
                             culprit_what);
      rec.reporter = fmt::format("rank {}'s flight recorder", self);
      rec.timeout = true;
      rdzv::publish_failure(store, rec);
    }
    return report;
  } catch (const std::exception& e) {
    return fmt::format("(could not be gathered: {})", e.what());
  }
}

}  // namespace dcomm::runtime
