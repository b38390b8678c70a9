#include "tools/run/options.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cmath>

#include "tools/run/suggest.hpp"
#include "tools/run/torch_compat.hpp"

namespace dcomm::run {
namespace {

constexpr int kMaxPort = 65535;

Duration seconds_option(const char* name, double seconds, bool allow_zero) {
  if (!std::isfinite(seconds) || seconds < 0 || (!allow_zero && seconds == 0)) {
    throw UsageError(fmt::format("{} must be a {} number of seconds (got {})", name,
                                 allow_zero ? "non-negative" : "positive", seconds));
  }
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
}

// Cross-option rules CLI11 cannot express; each message names the options involved.
void validate(LaunchOptions& o, bool port_given, bool addr_given, bool node_rank_given) {
  if (o.command.empty()) throw UsageError("no program to run; usage: dcomm-run [options] -- program [args...]");
  if (o.nproc_per_node <= 0) {
    throw UsageError(fmt::format("--nproc-per-node must be at least 1 (got {})", o.nproc_per_node));
  }
  if (o.nnodes <= 0) throw UsageError(fmt::format("--nnodes must be at least 1 (got {})", o.nnodes));
  if (o.elastic() && node_rank_given) {
    throw UsageError(fmt::format("--node-rank: with --nnodes {}:{} (elastic) node ranks are assigned at each "
                                 "rendezvous round, in the order the agents joined; drop --node-rank",
                                 o.nnodes_min, o.nnodes));
  }
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    throw UsageError(fmt::format("--node-rank must be in [0, {}) for --nnodes {} (got {})", o.nnodes, o.nnodes,
                                 o.node_rank));
  }
  if (o.max_restarts < 0) throw UsageError(fmt::format("--max-restarts must be at least 0 (got {})", o.max_restarts));
  if (o.master_port < 0 || o.master_port > kMaxPort) {
    throw UsageError(fmt::format("--master-port must be in [0, {}] (got {})", kMaxPort, o.master_port));
  }
  if (o.standalone) {
    if (o.nnodes != 1) throw UsageError(fmt::format("--standalone runs one node, but --nnodes is {}", o.nnodes));
    if (addr_given || port_given) {
      throw UsageError("--standalone picks its own store address; drop --master-addr/--master-port");
    }
    o.master_addr = "127.0.0.1";
    o.master_port = 0;
  }
  if (o.nnodes > 1 && o.host_store && !port_given) o.master_port = kDefaultMasterPort;
  if (o.nnodes > 1 && o.master_port == 0) {
    throw UsageError(fmt::format("--master-port 0 (a free port) works on one node only; --nnodes {} needs a fixed port",
                                 o.nnodes));
  }
  if (o.master_addr.empty()) throw UsageError("--master-addr must not be empty");
}

std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

std::string LaunchOptions::nnodes_text() const {
  return elastic() ? fmt::format("{}:{}", nnodes_min, nnodes) : std::to_string(nnodes);
}

void parse_endpoint(const std::string& endpoint, std::string* host, int* port) {
  auto bad = [&](const char* why) {
    return UsageError(fmt::format("--rdzv-endpoint '{}' is not host:port ({})", endpoint, why));
  };
  std::size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0) throw bad("expected host:port, e.g. 10.0.0.1:29500");
  std::string h = endpoint.substr(0, colon);
  if (h.front() == '[') {
    if (h.size() < 3 || h.back() != ']') throw bad("an IPv6 address needs [brackets]");
    h = h.substr(1, h.size() - 2);
  }
  std::string p = endpoint.substr(colon + 1);
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) throw bad("bad port");
  int value = std::stoi(p);
  if (value < 1 || value > kMaxPort) throw bad("the port must be in [1, 65535]");
  *host = h;
  *port = value;
}

CommandLine parse_command_line(int argc, char** argv) {
  CommandLine out;
  LaunchOptions& o = out.options;
  double grace_s = 5.0;
  double rdzv_timeout_s = 300.0;
  double node_timeout_s = 30.0;
  std::string endpoint;
  bool no_prefix = false;

  CLI::App app{"dcomm-run: start N ranks of a program on this node, host or join the store, supervise them.",
               "dcomm-run"};
  // --nproc-per-node and --nnodes take torchrun's forms (auto|cpu|gpu, MIN:MAX): torch_compat.cpp parses them.
  TorchFlags torch;
  add_torch_flags(app, &torch);
  auto* node_rank = app.add_option("--node-rank,--node_rank", o.node_rank, "this node's rank in [0, nnodes) (default 0)");
  auto* addr = app.add_option("--master-addr,--master_addr", o.master_addr,
                              "the store's address; node 0 hosts it there (default 127.0.0.1)");
  auto* port = app.add_option("--master-port,--master_port", o.master_port,
                              "the store's port (default: a free one on one node, 29500 on several)");
  auto* rdzv = app.add_option("--rdzv-endpoint,--rdzv_endpoint", endpoint,
                              "host:port of a store that already runs; no launcher hosts one");
  auto* standalone = app.add_flag("--standalone", o.standalone, "one node, a store on 127.0.0.1 at a free port");
  app.add_option("--max-restarts,--max_restarts", o.max_restarts, "restart the group this many times on failure");
  app.add_flag("--keep-going", o.keep_going,
               "a rank that dies does not stop the others: they shrink their group (ProcessGroup::shrink) and go on");
  app.add_option("--grace-period", grace_s, "seconds between SIGTERM and SIGKILL when stopping ranks (default 5)");
  double window_s = std::chrono::duration<double>(o.failure_window).count();
  app.add_option("--failure-window", window_s,
                 "seconds the other ranks get to report a failed rank and exit before SIGTERM (default 3)");
  app.add_option("--rdzv-timeout", rdzv_timeout_s, "seconds to wait for every node to join (default 300)");
  app.add_option("--node-timeout", node_timeout_s,
                 "seconds without a heartbeat after which another node's launcher counts as lost (default 30)");
  app.add_option("--host-id", o.host_id, "exported as DCOMM_HOST_ID: ranks with equal ids share a node");
  app.add_flag("--no-prefix", no_prefix, "do not prefix output lines with [rank R]: ");
  // Everything after "--" (or after the first word that is not an option) is the program and its arguments.
  app.prefix_command(true);
  app.footer("usage: dcomm-run [options] -- program [args...]");
  rdzv->excludes(addr)->excludes(port)->excludes(standalone);
  standalone->excludes(rdzv);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out.show_help = true;
    out.help = app.help();
    return out;
  } catch (const CLI::ParseError& e) {
    throw UsageError(one_line(e.what()));
  }
  o.command = app.remaining();
  if (!o.command.empty() && o.command.front() == "--") {
    o.command.erase(o.command.begin());
  } else if (!o.command.empty() && o.command.front().starts_with("-")) {
    throw UsageError(unknown_option_message(o.command.front(), option_names(app)));
  }
  o.prefix_output = !no_prefix;
  o.grace_period = seconds_option("--grace-period", grace_s, true);
  o.failure_window = seconds_option("--failure-window", window_s, true);
  o.rdzv_timeout = seconds_option("--rdzv-timeout", rdzv_timeout_s, false);
  o.node_timeout = seconds_option("--node-timeout", node_timeout_s, false);
  apply_torch_flags(torch, &o);
  if (!endpoint.empty()) {
    parse_endpoint(endpoint, &o.master_addr, &o.master_port);
    // With torchrun's --rdzv-backend, the endpoint is where node 0's launcher hosts the store (torchrun's
    // meaning); without it, a store that already runs there (dcomm-run's own meaning).
    o.host_store = !o.torch.rdzv_backend.empty();
  }
  validate(o, port->count() > 0 || !endpoint.empty(), addr->count() > 0, node_rank->count() > 0);
  return out;
}

}  // namespace dcomm::run
