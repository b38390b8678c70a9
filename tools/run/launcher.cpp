#include "tools/run/launcher.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <random>

#include <dcomm/error.hpp>
#include <fmt/format.h>

#include "tools/run/supervisor.hpp"

namespace dcomm::run {
namespace {

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

// Until the launcher hosts the store, a free port is found by binding port 0 and releasing it; rank 0 hosts.
int free_port(const std::string& addr) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw SystemError("socket", errno);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  ::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  socklen_t len = sizeof(sa);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
    port = ntohs(sa.sin_port);
  }
  int err = errno;
  ::close(fd);
  if (port < 0) throw SystemError("finding a free port on " + addr, err);
  return port;
}

void print_line(const std::string& line) {
  std::string s = line + "\n";
  std::fputs(s.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace

int run_launcher(const LaunchOptions& options, SignalWatcher& signals) {
  const std::string host = this_host();
  RoundInfo round;
  round.run_id = new_run_id();
  round.master_addr = options.master_addr;
  round.master_port = options.master_port != 0 ? options.master_port : free_port(options.master_addr);
  round.store_hosted = false;

  Supervisor supervisor(options, signals, nullptr, host);
  for (int restart = 0;; ++restart) {
    round.restart_count = restart;
    RoundResult r;
    try {
      r = supervisor.run_round(round);
    } catch (const SystemError& e) {
      print_line(fmt::format("dcomm-run: error: {}", e.what()));
      return kExitCannotStart;
    }
    switch (r.outcome) {
      case RoundResult::Outcome::kSucceeded:
        return kExitSuccess;
      case RoundResult::Outcome::kInterrupted:
        print_line(fmt::format("dcomm-run: received {}; stopped {} rank(s)", describe_signal(r.signal),
                               r.stopped.size()));
        return kExitSignalBase + r.signal;
      case RoundResult::Outcome::kLinkLost:
        print_line(fmt::format("dcomm-run: error: lost the store at {}:{} ({}); stopped this node's ranks",
                               round.master_addr, round.master_port, r.link_error));
        return kExitLauncherError;
      case RoundResult::Outcome::kFailed:
        break;
    }
    if (restart < options.max_restarts) {
      print_line(fmt::format("dcomm-run: {}; restarting the group (restart {} of {})",
                             describe_failure_briefly(r.failures.front()), restart + 1, options.max_restarts));
      continue;
    }
    std::string summary = format_failure_summary(r.failures, r.stopped, options.world_size());
    std::fputs(summary.c_str(), stderr);
    return exit_code_for(r.failures.front());
  }
}

}  // namespace dcomm::run
