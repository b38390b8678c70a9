#include "tools/run/elastic_rendezvous.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/run/node_rendezvous.hpp"

namespace dcomm::run {
namespace {

std::string key(int round, const std::string& what) { return fmt::format("round/{}/{}", round, what); }
std::string slot_key(int round, int slot) { return fmt::format("round/{}/slot/{}", round, slot); }

Store::Bytes bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const Store::Bytes& b) { return {b.begin(), b.end()}; }

void say(const std::string& line) {
  std::string s = "dcomm-run: " + line + "\n";
  std::fputs(s.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace

ElasticRendezvous::ElasticRendezvous(const LaunchOptions& o, std::shared_ptr<Store> store, SignalWatcher& signals,
                                     std::string host, std::string endpoint)
    : options_(o), store_(std::move(store)), signals_(signals), host_(std::move(host)), endpoint_(std::move(endpoint)) {}

std::string ElasticRendezvous::register_agent(const std::string& own_run_id, bool set_run_id) {
  if (set_run_id) store_->compare_set("run_id", {}, bytes(own_run_id));
  id_ = static_cast<int>(store_->add("agents", 1));
  nlohmann::json mine = {{"nproc", options_.nproc_per_node},
                         {"max_restarts", options_.max_restarts},
                         {"nnodes", options_.nnodes_text()},
                         {"host", host_}};
  nlohmann::json first = nlohmann::json::parse(text(store_->compare_set("settings", {}, bytes(mine.dump()))));
  struct Field {
    const char* name;
    const char* option;
  };
  for (Field f : {Field{"nproc", "--nproc-per-node"}, Field{"max_restarts", "--max-restarts"},
                  Field{"nnodes", "--nnodes"}}) {
    if (mine[f.name] == first[f.name]) continue;
    throw LaunchError(fmt::format("agents disagree: this dcomm-run (host {}) runs {} {} but the first agent (host {}) "
                                  "runs {} {}; every agent of an elastic job must be started with the same {}",
                                  host_, f.option, mine[f.name].dump(), first["host"].get<std::string>(), f.option,
                                  first[f.name].dump(), f.option));
  }
  // The hosting agent set the run id before its store could be reached; with another's store the first agent did.
  if (!set_run_id) {
    Deadline deadline = Deadline::after(options_.rdzv_timeout);
    while (!store_->check({"run_id"})) {
      if (deadline.expired()) timed_out(deadline, "the store holds no run id: did the agent hosting it fail?");
      pause_or_interrupt(signals_);
    }
  }
  return store_->get_string("run_id");
}

int ElasticRendezvous::claim_slot(int round) {
  const std::string me = nlohmann::json{{"id", id_}, {"host", host_}, {"pid", ::getpid()}}.dump();
  for (int i = 0; i < options_.nnodes; ++i) {
    if (text(store_->compare_set(slot_key(round, i), {}, bytes(me))) == me) return i;
  }
  return -1;
}

int ElasticRendezvous::slots_taken(int round) {
  int n = 0;
  while (n < options_.nnodes && store_->check({slot_key(round, n)})) ++n;
  return n;
}

ElasticRound ElasticRendezvous::read_round(int round, int n) {
  ElasticRound out;
  out.round = round;
  for (int i = 0; i < n; ++i) {
    nlohmann::json j = nlohmann::json::parse(store_->get_string(slot_key(round, i)));
    out.members.push_back({j["id"].get<int>(), j["host"].get<std::string>(), j["pid"].get<int>()});
  }
  std::sort(out.members.begin(), out.members.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  for (std::size_t k = 0; k < out.members.size(); ++k) {
    if (out.members[k].id == id_) out.node_rank = static_cast<int>(k);
  }
  return out;
}

std::string ElasticRendezvous::describe_slots(int round, int n) {
  std::string out;
  for (const auto& m : read_round(round, n).members) {
    out += fmt::format("{}{} (agent {}, pid {})", out.empty() ? "" : ", ", m.host, m.id, m.pid);
  }
  return out.empty() ? "none" : out;
}

void ElasticRendezvous::timed_out(const Deadline& deadline, const std::string& what) {
  throw LaunchError(fmt::format("elastic rendezvous timed out after {} (--rdzv-timeout / join_timeout {}): {}",
                                format_duration(deadline.elapsed()), format_duration(options_.rdzv_timeout), what));
}

std::optional<ElasticRound> ElasticRendezvous::next_round(int from, const std::vector<int>& expected) {
  Deadline deadline = Deadline::after(options_.rdzv_timeout);
  int r = from;
  if (r < 0) {
    r = store_->check({"current"}) ? std::stoi(store_->get_string("current")) : 0;
    while (store_->check({slot_key(r + 1, 0)})) ++r;  // the hint is set just after a round opens
  }
  while (true) {
    if (!finished_outcome().empty()) return std::nullopt;
    if (!store_->check({key(r, "closed")})) {
      if (int slot = claim_slot(r); slot >= 0) {
        if (slot == 0) store_->set("current", std::to_string(r));
        if (auto got = wait_for_close(r, slot, expected, deadline)) return got;
      }
    }
    // A round abandoned by an agent that timed out (closed with 0 nodes) is skipped: the next one is open.
    const std::string closed = key(r, "closed");
    if (!store_->check({closed}) || store_->get_string(closed) != "0") wait_for_next(r, deadline);
    ++r;
  }
}

std::optional<ElasticRound> ElasticRendezvous::wait_for_close(int round, int slot, const std::vector<int>& expected,
                                                               const Deadline& deadline) {
  // After a failure the survivors come back as soon as they stopped their ranks; the round waits for them that
  // long (bounded), so that a slow one is not left to wait for yet another round.
  const Duration rejoin_bound = options_.failure_window + options_.grace_period + options_.node_timeout;
  std::optional<Clock::time_point> min_since;
  forming_ = round;
  while (true) {
    if (store_->check({key(round, "closed")})) {
      forming_ = -1;
      const int n = std::stoi(store_->get_string(key(round, "closed")));
      if (slot >= n) return std::nullopt;
      return read_round(round, n);
    }
    const int taken = slots_taken(round);
    if (taken >= options_.nnodes_min && !min_since) min_since = Clock::now();
    bool close = taken >= options_.nnodes;
    if (!close && min_since && Clock::now() - *min_since >= options_.last_call_timeout) {
      ElasticRound so_far = read_round(round, taken);
      bool all_back = std::all_of(expected.begin(), expected.end(), [&](int id) {
        return store_->check({fmt::format("agent/{}/gone", id)}) ||
               std::any_of(so_far.members.begin(), so_far.members.end(), [&](const auto& m) { return m.id == id; });
      });
      close = all_back || deadline.elapsed() >= rejoin_bound;
    }
    // Enough nodes at the join timeout: start with them rather than fail (a last call longer than the timeout).
    if (taken >= options_.nnodes_min && deadline.expired()) close = true;
    if (close) {
      store_->compare_set(key(round, "closed"), {}, bytes(std::to_string(taken)));
      continue;
    }
    if (deadline.expired()) {
      // Abandon the round, so that an agent arriving later does not make up MIN with this one, gone by then; an
      // agent still waiting in it moves on to the next round.
      if (text(store_->compare_set(key(round, "closed"), {}, bytes("0"))) != "0") continue;  // it closed meanwhile
      timed_out(deadline, fmt::format("round {} has {} node(s) ({}) but --nnodes {}:{} needs at least {}; start "
                                      "dcomm-run on more nodes with --nnodes {}:{} and the store at {}",
                                      round, taken, describe_slots(round, taken), options_.nnodes_min,
                                      options_.nnodes, options_.nnodes_min, options_.nnodes_min, options_.nnodes,
                                      endpoint_));
    }
    pause_or_interrupt(signals_);
  }
}

void ElasticRendezvous::wait_for_next(int round, const Deadline& deadline) {
  store_->add(key(round, "waiting"), 1);
  const std::string closed = key(round, "closed");
  const int n = store_->check({closed}) ? std::stoi(store_->get_string(closed)) : options_.nnodes;
  const bool full = n >= options_.nnodes;
  say(fmt::format("rendezvous round {} runs with {} of at most {} nodes ({}){}; this agent waits for the next "
                  "round (up to --rdzv-timeout {})",
                  round, n, options_.nnodes, describe_slots(round, n),
                  full ? ": it is full, so the next round comes when a node fails or leaves"
                       : ": its agents will rendezvous again to admit this one",
                  format_duration(options_.rdzv_timeout)));
  while (!store_->check({slot_key(round + 1, 0)})) {
    if (!finished_outcome().empty()) return;
    if (deadline.expired()) {
      timed_out(deadline, fmt::format("no place for this agent (host {}): round {} runs with {} of at most {} nodes "
                                      "({}){}",
                                      host_, round, n, options_.nnodes, describe_slots(round, n),
                                      full ? " and no node left it" : " and its agents did not rendezvous again"));
    }
    pause_or_interrupt(signals_);
  }
}

int ElasticRendezvous::restarts_before(int round, int mine) {
  const std::string k = key(round, "restarts");
  return store_->check({k}) ? std::stoi(store_->get_string(k)) : mine;
}

void ElasticRendezvous::set_restarts_before(int round, int used) {
  store_->compare_set(key(round, "restarts"), {}, bytes(std::to_string(used)));
}

void ElasticRendezvous::leave() noexcept {
  try {
    store_->set(fmt::format("agent/{}/gone", id_), "1");
    // A round still forming with this agent in it is abandoned: the others form the next one without it.
    if (forming_ >= 0) store_->compare_set(key(forming_, "closed"), {}, bytes("0"));
  } catch (const std::exception&) {
    // The store is gone: nobody waits for this agent then.
  }
}

std::string ElasticRendezvous::finished_outcome() {
  return store_->check({"finished"}) ? store_->get_string("finished") : "";
}

void ElasticRendezvous::finish(const std::string& outcome, int round, int members, bool hosting, Duration bound) {
  store_->compare_set("finished", {}, bytes(outcome));
  store_->add("done", 1);
  if (!hosting) return;
  Deadline deadline = Deadline::after(bound);
  // The agents of the last round, and those waiting for a place, read the outcome before the store goes away.
  while (store_->add("done", 0) < members + store_->add(key(round, "waiting"), 0) && !deadline.expired()) {
    pause_or_interrupt(signals_);
  }
}

}  // namespace dcomm::run
