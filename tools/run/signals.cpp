#include "tools/run/signals.hpp"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <dcomm/error.hpp>
#include <fmt/format.h>

namespace dcomm::run {

SignalWatcher::SignalWatcher() {
  sigemptyset(&set_);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&set_, s);
  if (pthread_sigmask(SIG_BLOCK, &set_, &old_) != 0) throw SystemError("dcomm-run: pthread_sigmask", errno);
  fd_ = ::signalfd(-1, &set_, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) throw SystemError("dcomm-run: signalfd", errno);
  // A closed stdout must not kill the launcher mid-cleanup; writes then fail with EPIPE instead.
  ::signal(SIGPIPE, SIG_IGN);
}

SignalWatcher::~SignalWatcher() {
  if (fd_ >= 0) ::close(fd_);
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

std::vector<int> SignalWatcher::drain() {
  std::vector<int> out;
  signalfd_siginfo info;
  while (true) {
    ssize_t n = ::read(fd_, &info, sizeof(info));
    if (n != static_cast<ssize_t>(sizeof(info))) break;
    out.push_back(static_cast<int>(info.ssi_signo));
  }
  return out;
}

bool is_forwarded_signal(int sig) { return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT; }

std::string describe_signal(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* text = sigdescr_np(sig);
  return fmt::format("SIG{} ({})", abbrev != nullptr ? abbrev : std::to_string(sig).c_str(),
                     text != nullptr ? text : "unknown signal");
}

}  // namespace dcomm::run
