#include "tools/run/elastic_agent.hpp"

#include <algorithm>
#include <memory>

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>
#include <fmt/format.h>

#include "tools/run/elastic_link.hpp"
#include "tools/run/elastic_rendezvous.hpp"
#include "tools/run/launcher.hpp"
#include "tools/run/node_rendezvous.hpp"
#include "tools/run/rank_records.hpp"
#include "tools/run/store_secret.hpp"
#include "tools/run/supervisor.hpp"

namespace dcomm::run {
namespace {

// The first agent to bind the endpoint hosts the store (torchrun's c10d: the agent on the endpoint's host); for
// the others the bind fails (the port is taken, or the address is another host's) and they connect to it.
std::unique_ptr<TcpStoreServer> try_to_host(const LaunchOptions& o, const std::string& secret,
                                            const std::string& run_id) {
  if (!o.host_store) return nullptr;
  try {
    return start_tcp_store_server(o.master_addr, static_cast<uint16_t>(o.master_port), store_options(o, secret, run_id));
  } catch (const Error&) {
    return nullptr;
  }
}

// "rank 1 failed (exit code 3)" or "dcomm-run on node 2 (host b) stopped responding ...".
std::string why_round_ended(const RankExit& e) { return e.rank >= 0 ? describe_failure_briefly(e) : describe_exit(e); }

// The agents expected back in the next round: this round's, less one that is gone (lost, or received a signal).
std::vector<int> survivors(const ElasticRound& round, const RankExit& cause) {
  std::vector<int> out;
  for (std::size_t n = 0; n < round.members.size(); ++n) {
    const bool gone = cause.rank < 0 && !cause.rejoin && cause.node_rank == static_cast<int>(n);
    if (!gone) out.push_back(round.members[n].id);
  }
  return out;
}

struct Agent {
  const LaunchOptions& options;
  SignalWatcher& signals;
  std::string host;
  bool hosting;
  std::shared_ptr<Store> store;
  std::shared_ptr<Store> rank_store;
  ElasticRendezvous& rdzv;
  RoundInfo info;

  int run() {
    int restarts_used = 0;
    int from = -1;
    std::vector<int> expected;
    while (true) {
      std::optional<ElasticRound> round = rdzv.next_round(from, expected);
      if (!round) return job_finished_without_us();
      // This round's world: its node count and this agent's node rank.
      LaunchOptions o = options;
      o.nnodes = o.nnodes_min = static_cast<int>(round->members.size());
      o.node_rank = round->node_rank;
      print_line(fmt::format("dcomm-run: rendezvous round {}: {} nodes, this is node {} (ranks {}..{} of {})",
                             round->round, o.nnodes, o.node_rank, global_rank(o, 0),
                             global_rank(o, o.nproc_per_node - 1), o.world_size()));
      // One count for the job: an agent admitted late takes the round's, not its own 0.
      restarts_used = rdzv.restarts_before(round->round, restarts_used);
      info.restart_count = round->round;
      info.restarts_used = restarts_used;
      ElasticLink link(options, store, *round, rdzv.id());
      Supervisor supervisor(o, signals, &link, host, rank_store);
      RoundResult r;
      try {
        r = supervisor.run_round(info);
      } catch (const SystemError& e) {
        print_line(fmt::format("dcomm-run: error: {}", e.what()));
        report_cannot_start(o, link, round->round, host, e.what());
        // The others stop their ranks; no later round waits for this agent.
        rdzv.leave();
        return kExitCannotStart;
      }
      switch (r.outcome) {
        case RoundResult::Outcome::kSucceeded:
          return finish(fmt::format("succeeded in round {} on {} nodes", round->round, o.nnodes), *round, 0);
        case RoundResult::Outcome::kInterrupted:
          rdzv.leave();
          print_line(fmt::format("dcomm-run: received {}; stopped {} rank(s)", describe_signal(r.signal),
                                 r.stopped.size()));
          return kExitSignalBase + r.signal;
        case RoundResult::Outcome::kLinkLost:
          print_line(fmt::format("dcomm-run: error: lost the store at {}, hosted by the first agent's dcomm-run "
                                 "({}); stopped this node's ranks",
                                 rdzv.endpoint(), r.link_error));
          return kExitLauncherError;
        case RoundResult::Outcome::kFailed:
          break;
      }
      const RankExit& cause = r.failures.front();
      if (cause.rejoin) {
        print_line(fmt::format("dcomm-run: {}; stopped this node's ranks to rendezvous again (no restart used)",
                               cause.note));
      } else if (restarts_used < options.max_restarts && r.link_error.empty()) {
        ++restarts_used;
        print_line(fmt::format("dcomm-run: {}; restarting the group (restart {} of {}) in a new rendezvous round",
                               why_round_ended(cause), restarts_used, options.max_restarts));
      } else {
        std::string summary = format_failure_summary(r.failures, r.stopped, o.world_size(), r.flight_report);
        if (!r.link_error.empty()) summary += fmt::format("dcomm-run: the other nodes were not told: {}\n", r.link_error);
        std::fputs(summary.c_str(), stderr);
        return finish(fmt::format("failed in round {}: {}", round->round, why_round_ended(cause)), *round,
                      exit_code_for(cause), cause.rank < 0 ? 1 : 0);
      }
      expected = survivors(*round, cause);
      from = round->round + 1;
      rdzv.set_restarts_before(from, restarts_used);
    }
  }

  // Publishes the outcome; the host keeps the store up until the others read it. `lost`: members that will not.
  int finish(const std::string& outcome, const ElasticRound& round, int code, int lost = 0) {
    try {
      rdzv.finish(outcome, round.round, static_cast<int>(round.members.size()) - lost, hosting,
                  options.grace_period + kFinishBound);
    } catch (const Error&) {
      // The outcome on this node stands; the others see the store close.
    }
    return code;
  }

  int job_finished_without_us() {
    std::string outcome = rdzv.finished_outcome();
    store->add("done", 1);
    const bool ok = outcome.starts_with("succeeded");
    print_line(fmt::format("dcomm-run: {}the job {} before this agent could join; nothing to run here",
                           ok ? "" : "error: ", outcome));
    return ok ? kExitSuccess : kExitLauncherError;
  }
};

}  // namespace

int run_elastic(const LaunchOptions& options, SignalWatcher& signals) {
  const std::string endpoint = fmt::format("{}:{}", options.master_addr, options.master_port);
  RoundInfo info;
  info.master_addr = options.master_addr;
  info.master_port = options.master_port;
  info.store_hosted = true;
  info.store_secret = launch_secret(options);
  info.torch_port = options.master_port + 1;  // every agent's choice, without talking (launcher.cpp)
  const std::string own_run_id = new_run_id();
  std::unique_ptr<TcpStoreServer> server = try_to_host(options, info.store_secret, own_run_id);
  const char* phase = "while connecting to the store";
  std::unique_ptr<ElasticRendezvous> rdzv;
  try {
    auto store = connect_store(options.master_addr, options.master_port, options.rdzv_timeout, signals,
                               launcher_client_options(options, info.store_secret, server ? own_run_id : ""),
                               options.host_store ? "this agent could not host it there (is the address this host's, "
                                                    "or the port another program's?) and no other agent does"
                                                  : "is the store given by --rdzv-endpoint running?");
    rdzv = std::make_unique<ElasticRendezvous>(options, store, signals, this_host(), endpoint);
    phase = "while joining the elastic rendezvous";
    // The host's run id names its store's job; with another's store (no host) the first agent's is taken.
    info.run_id = rdzv->register_agent(own_run_id, server != nullptr || !options.host_store);
    Agent agent{options, signals, this_host(), server != nullptr, store,
                connect_rank_store(options.master_addr, options.master_port,
                                   launcher_client_options(options, info.store_secret, info.run_id)),
                *rdzv, info};
    return agent.run();
  } catch (const Interrupted& i) {
    // A round this agent joined must not wait for it, nor run with it.
    if (rdzv) rdzv->leave();
    return interrupted(i.signal, phase);
  } catch (const LaunchError& e) {
    print_line(fmt::format("dcomm-run: error: {}", e.what()));
    return kExitLauncherError;
  } catch (const Error& e) {
    print_line(fmt::format("dcomm-run: error: the store at {} failed: {}", endpoint, e.what()));
    return kExitLauncherError;
  }
}

}  // namespace dcomm::run
