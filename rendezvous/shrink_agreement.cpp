// The shrink agreement (shrink_agreement.hpp): polls the store in short sleeps; every decision is one
// compare_set, so racing proposers and late joiners all end up reading the same value.
#include "rendezvous/shrink_agreement.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <dcomm/error.hpp>
#include <sstream>
#include <thread>

namespace dcomm::rdzv {
namespace {

constexpr auto kPoll = std::chrono::milliseconds(10);

std::string key(int round, const char* what) { return fmt::format("r{}/{}", round, what); }
std::string key(int round, const char* what, int rank) { return fmt::format("r{}/{}/{}", round, what, rank); }

std::string as_string(const Store::Bytes& b) { return std::string(b.begin(), b.end()); }
Store::Bytes as_bytes(const std::string& s) { return Store::Bytes(s.begin(), s.end()); }

bool dead(const ShrinkAgreement& a, int r) { return a.known_dead && a.known_dead(r); }

[[noreturn]] void timed_out(const ShrinkAgreement& a, const std::string& stage, const std::vector<int>& waiting) {
  throw TimeoutError(
      fmt::format("{}: {} did not finish within {} (waited {}); still waiting on rank(s) {}; check that "
                  "the store ({}) is up and that those ranks called shrink()",
                  a.what, stage, format_duration(a.deadline.timeout()), format_duration(a.deadline.elapsed()),
                  fmt::join(waiting, ","), a.store->describe()));
}

}  // namespace

std::string encode_ranks(const std::vector<int>& ranks) { return fmt::format("{}", fmt::join(ranks, ",")); }

std::vector<int> decode_ranks(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(std::stoi(item));
  }
  return out;
}

std::vector<int> agree_members(const ShrinkAgreement& a, int round, const std::vector<int>& candidates) {
  Store& s = *a.store;
  const std::string decision_key = key(round, "decision");
  // A decision already made (this rank is late): read it, never add to it.
  if (!s.check({decision_key})) {
    s.set(key(round, "joined", a.self), "1");
    if (a.on_joined) a.on_joined();
  }
  std::string decision;
  for (;;) {
    if (s.check({decision_key})) {
      decision = s.get_string(decision_key);
      break;
    }
    std::vector<int> joined, pending;
    for (int r : candidates) {
      if (s.check({key(round, "joined", r)})) {
        joined.push_back(r);
      } else if (!dead(a, r)) {
        pending.push_back(r);
      }
    }
    if (pending.empty() || a.join_deadline.expired()) {
      decision = as_string(s.compare_set(decision_key, {}, as_bytes(encode_ranks(joined))));
      break;
    }
    if (a.deadline.expired()) timed_out(a, fmt::format("round {}'s join", round), pending);
    std::this_thread::sleep_for(kPoll);
  }
  std::vector<int> members = decode_ranks(decision);
  if (std::find(members.begin(), members.end(), a.self) == members.end()) {
    throw ExcludedError(fmt::format(
        "{}: this rank was excluded: the survivors agreed on members [{}] (round {}) without it, because it had not "
        "joined the shrink within the join window ({}) — it was stopped, hung or too slow to notice the failure. "
        "It is no longer part of the job and should exit; its old group is unusable",
        a.what, decision, round, format_duration(a.join_deadline.timeout())));
  }
  return members;
}

bool agree_outcome(const ShrinkAgreement& a, int round, const std::vector<int>& members, bool ready) {
  Store& s = *a.store;
  const std::string outcome_key = key(round, "outcome");
  auto settle = [&](const char* vote) { return as_string(s.compare_set(outcome_key, {}, as_bytes(vote))) == "commit"; };
  if (!ready) return settle("abort");
  s.set(key(round, "ready", a.self), "1");
  for (;;) {
    if (s.check({outcome_key})) return s.get_string(outcome_key) == "commit";
    std::vector<int> waiting;
    bool lost = false;
    for (int r : members) {
      if (s.check({key(round, "ready", r)})) continue;  // ready first: a member that died after it counts as ready
      waiting.push_back(r);
      lost = lost || dead(a, r);
    }
    if (waiting.empty()) return settle("commit");
    if (lost) return settle("abort");
    // Everyone must take the same branch: past the deadline this member votes abort (and the caller's next
    // round reports the timeout).
    if (a.deadline.expired()) return settle("abort");
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace dcomm::rdzv
