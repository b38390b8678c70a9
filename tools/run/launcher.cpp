#include "tools/run/launcher.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <random>

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>
#include <fmt/format.h>

#include "tools/run/elastic_agent.hpp"
#include "tools/run/node_rendezvous.hpp"
#include "tools/run/rank_records.hpp"
#include "tools/run/store_secret.hpp"
#include "tools/run/supervisor.hpp"

namespace dcomm::run {

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

std::string new_run_id() {
  std::random_device rd;
  std::uniform_int_distribution<uint64_t> dist;
  return fmt::format("{:016x}", dist(rd) ^ (static_cast<uint64_t>(::getpid()) << 32));
}

namespace {

// The port torch's env:// store gets (MASTER_PORT). One node: a port free right now on this host (as torchrun
// picks one). Several nodes must agree without talking: the store's port + 1.
int torch_port(const LaunchOptions& options, int store_port) {
  if (options.nnodes > 1) return store_port + 1;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof addr;
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) ::close(fd);
  return port > 0 ? port : store_port + 1;
}

}  // namespace

void print_line(const std::string& line) {
  std::string s = line + "\n";
  std::fputs(s.c_str(), stderr);
  std::fflush(stderr);
}

int interrupted(int sig, const char* when) {
  print_line(fmt::format("dcomm-run: received {} {}; exiting", describe_signal(sig), when));
  return kExitSignalBase + sig;
}

void report_cannot_start(const LaunchOptions& options, NodeLink& link, int round, const std::string& host,
                         const std::string& why) {
  RankExit e;
  e.rank = global_rank(options, 0);
  e.local_rank = 0;
  e.node_rank = options.node_rank;
  e.host = host;
  e.code = kExitCannotStart;
  e.stderr_tail = {why};
  try {
    link.report_failure(round, e);
  } catch (const Error&) {
    // The store is gone too: the other nodes notice that instead.
  }
}

namespace {

// The rounds of ranks: run one, and while it failed and restarts remain, run the next.
int run_rounds(const LaunchOptions& options, Supervisor& supervisor, NodeRendezvous* link, const std::string& host,
               RoundInfo round) {
  for (int restart = 0;; ++restart) {
    round.restart_count = restart;
    RoundResult r;
    try {
      r = supervisor.run_round(round);
    } catch (const SystemError& e) {
      print_line(fmt::format("dcomm-run: error: {}", e.what()));
      if (link != nullptr) report_cannot_start(options, *link, restart, host, e.what());
      return kExitCannotStart;
    }
    switch (r.outcome) {
      case RoundResult::Outcome::kSucceeded:
        if (!r.lost.empty() || !r.shrinks.empty()) {
          std::fputs(format_keep_going_summary(r.lost, r.shrinks, options.world_size()).c_str(), stderr);
        }
        return kExitSuccess;
      case RoundResult::Outcome::kInterrupted:
        print_line(fmt::format("dcomm-run: received {}; stopped {} rank(s)", describe_signal(r.signal),
                               r.stopped.size()));
        return kExitSignalBase + r.signal;
      case RoundResult::Outcome::kLinkLost:
        print_line(fmt::format("dcomm-run: error: lost the store at {}:{}, hosted by node 0's dcomm-run ({}); "
                               "stopped this node's ranks",
                               round.master_addr, round.master_port, r.link_error));
        return kExitLauncherError;
      case RoundResult::Outcome::kFailed:
        break;
    }
    // A launcher that received a signal (rank -1) is going away: the world cannot be restarted without it.
    const bool restartable = r.link_error.empty() && r.failures.front().rank >= 0;
    if (restart < options.max_restarts && restartable) {
      print_line(fmt::format("dcomm-run: {}; restarting the group (restart {} of {})",
                             describe_failure_briefly(r.failures.front()), restart + 1, options.max_restarts));
      if (link != nullptr) link->restart_barrier(restart);
      continue;
    }
    std::string summary = format_failure_summary(r.failures, r.stopped, options.world_size(), r.flight_report);
    if (!r.link_error.empty()) summary += fmt::format("dcomm-run: the other nodes were not told: {}\n", r.link_error);
    std::fputs(summary.c_str(), stderr);
    return exit_code_for(r.failures.front());
  }
}

}  // namespace

int run_launcher(const LaunchOptions& options, SignalWatcher& signals) {
  if (options.elastic()) return run_elastic(options, signals);
  const std::string host = this_host();
  RoundInfo round;
  round.master_addr = options.master_addr;
  round.master_port = options.master_port;
  round.store_hosted = true;
  round.run_id = new_run_id();
  round.store_secret = launch_secret(options);

  std::unique_ptr<TcpStoreServer> server;
  if (options.host_store && options.node_rank == 0) {
    try {
      server = start_tcp_store_server(options.master_addr, static_cast<uint16_t>(options.master_port),
                                      store_options(options, round.store_secret, round.run_id));
    } catch (const Error& e) {
      // e names the address and the port and says what to check.
      throw UsageError(fmt::format("cannot host the store: {}", e.what()));
    }
    round.master_port = server->port();
  }
  round.torch_port = torch_port(options, round.master_port);

  std::unique_ptr<NodeRendezvous> link;
  int rc = kExitLauncherError;
  const char* phase = "while connecting to the store";
  try {
    if (options.nnodes > 1) {
      // Node 0 knows the run id (its own); the others learn it in the rendezvous.
      auto store = connect_store(round.master_addr, round.master_port, options.rdzv_timeout, signals,
                                 launcher_client_options(options, round.store_secret,
                                                         options.node_rank == 0 ? round.run_id : ""));
      link = std::make_unique<NodeRendezvous>(options, store, signals, host);
      phase = "while waiting for the other nodes";
      round.run_id = link->join(round.run_id);
    }
    phase = "between rounds";
    // The ranks' store, unprefixed: dcomm-run records deaths there for the survivors (rank_records.hpp).
    Supervisor supervisor(options, signals, link.get(), host,
                          connect_rank_store(round.master_addr, round.master_port,
                                             launcher_client_options(options, round.store_secret, round.run_id)));
    rc = run_rounds(options, supervisor, link.get(), host, round);
    if (link != nullptr && rc != kExitLauncherError) link->finish(options.grace_period + kFinishBound);
  } catch (const Interrupted& i) {
    return interrupted(i.signal, phase);
  } catch (const LaunchError& e) {
    print_line(fmt::format("dcomm-run: error: {}", e.what()));
    return kExitLauncherError;
  } catch (const Error& e) {
    print_line(fmt::format("dcomm-run: error: the store at {}:{} failed: {}", round.master_addr, round.master_port,
                           e.what()));
    return kExitLauncherError;
  }
  return rc;
}

}  // namespace dcomm::run
