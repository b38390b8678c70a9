#pragma once
// Elastic membership (--nnodes MIN:MAX), after torchrun's c10d rendezvous (torch/distributed/elastic/rendezvous/
// dynamic_rendezvous.py): the agents (one dcomm-run per node) meet in numbered rounds in the store. A round opens
// when its first agent joins; once MIN agents joined it stays open for --rdzv-conf last_call_timeout more (and,
// after a failure, until the previous round's survivors are back, bounded), or closes at once at MAX. An agent
// that finds a round closed waits for the next one: the running agents admit it (a new round) while there is room
// below MAX. Every key lives under "dcomm-run/":
//   run_id                      the launch's run id (set by the agent hosting the store, else by the first agent)
//   settings                    the first agent's settings; every agent must run with the same ones
//   agents                      counter: each agent's id, 1, 2, ... in arrival order
//   current                     the latest round opened (a hint for agents that arrive)
//   round/<r>/slot/<i>          i in [0, MAX): compare-set by the agent that takes place i, {"id", "host", "pid"}
//   round/<r>/closed            compare-set to N: round r's nodes are the agents in slots 0 .. N-1
//   round/<r>/waiting           counter: agents that found round r closed and wait for round r + 1
//   round/<r>/restarts          the restarts used before round r (set by round r - 1's agents as they leave it)
//   round/<r>/failed|succeeded  as in node_rendezvous.hpp, for round r (elastic_link.hpp)
//   agent/<id>/beat             counter: agent id's heartbeat during rounds (elastic_link.hpp)
//   agent/<id>/gone             set when agent id leaves for good (a signal): no round waits for it
//   finished                    the job's outcome, for agents still waiting for a round
//   done                        counter: agents that read the outcome (the store's host waits for them)
// Node ranks are assigned when a round closes: the members sorted by agent id (arrival order), so the same set of
// agents always gets the same ranks and the earliest agent, usually the store's host, is node 0.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <dcomm/store.hpp>

#include "common/deadline.hpp"
#include "tools/run/options.hpp"
#include "tools/run/signals.hpp"

namespace dcomm::run {

/// One agent of a round.
struct ElasticMember {
  int id = 0;
  std::string host;
  int pid = 0;
};

/// A closed round as one agent sees it.
struct ElasticRound {
  int round = 0;
  int node_rank = 0;                  ///< this agent's place in `members`
  std::vector<ElasticMember> members;  ///< by node rank
};

class ElasticRendezvous {
 public:
  /// `endpoint`: "host:port" of the store, for messages.
  ElasticRendezvous(const LaunchOptions& o, std::shared_ptr<Store> store, SignalWatcher& signals, std::string host,
                    std::string endpoint);

  /// Registers this agent (its id) and returns the run id: `own_run_id` when `set_run_id` (this agent hosts the
  /// store, whose job it names), else the first agent's. Throws LaunchError when this agent's settings differ
  /// from the first agent's.
  std::string register_agent(const std::string& own_run_id, bool set_run_id);

  /// Joins the first round still open from `from` on (-1: the latest round opened) and returns this agent's
  /// place once the round closes. `expected`: agent ids of the previous round that should be back; the round
  /// waits for them (bounded) before it closes below MAX. Returns nullopt when the job finished meanwhile
  /// (finished_outcome() says how). Throws LaunchError after --rdzv-timeout (join_timeout) naming who joined.
  std::optional<ElasticRound> next_round(int from, const std::vector<int>& expected);

  /// The restarts the job used before round r (TORCHELASTIC_RESTART_COUNT), or `mine` when no agent of the
  /// previous round said.
  int restarts_before(int round, int mine);
  /// Records the restarts used before round r (the first writer wins; every agent of round r - 1 counts alike).
  void set_restarts_before(int round, int used);
  /// Marks this agent as gone for good (it received a signal): no round waits for it, and a round still forming
  /// with it is abandoned (the others form the next one).
  void leave() noexcept;
  /// Publishes the job's outcome (first writer wins) and counts this agent done; the store's host (`hosting`)
  /// then waits, up to `bound`, until the `members` agents of the last round and those waiting have read it.
  void finish(const std::string& outcome, int round, int members, bool hosting, Duration bound);
  /// The job's outcome when it finished ("succeeded ..." or "failed ..."), else "".
  std::string finished_outcome();

  int id() const { return id_; }
  const std::string& endpoint() const { return endpoint_; }

 private:
  /// Takes the first free slot of round r; -1 when all MAX are taken.
  int claim_slot(int round);
  /// Slots 0 .. n-1 of round r taken so far.
  int slots_taken(int round);
  /// Waits in round r (holding `slot`) until it closes; nullopt when it closed without this agent.
  std::optional<ElasticRound> wait_for_close(int round, int slot, const std::vector<int>& expected,
                                             const Deadline& deadline);
  /// Waits (the round r being closed without this agent) until round r + 1 opens or the job finished.
  void wait_for_next(int round, const Deadline& deadline);
  /// The members of closed round r (slots 0 .. n-1) sorted into node ranks.
  ElasticRound read_round(int round, int n);
  /// "hosts a (agent 1), b (agent 2)" for the slots 0 .. n-1 of round r.
  std::string describe_slots(int round, int n);
  [[noreturn]] void timed_out(const Deadline& deadline, const std::string& what);

  const LaunchOptions& options_;
  std::shared_ptr<Store> store_;
  SignalWatcher& signals_;
  std::string host_;
  std::string endpoint_;
  int id_ = 0;
  int forming_ = -1;  ///< the round this agent holds a place in while it has not closed yet
};

}  // namespace dcomm::run
