#include "tools/run/spawn.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <cerrno>

#include <dcomm/error.hpp>

namespace dcomm::run {
namespace {

// Closes what it holds unless released: the pipes and spawn objects on every error path.
struct FdPair {
  int fds[2] = {-1, -1};
  FdPair() {
    if (::pipe2(fds, O_CLOEXEC) != 0) throw SystemError("pipe2 for a rank's output", errno);
  }
  ~FdPair() {
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
  }
  int release_read() {
    int fd = fds[0];
    fds[0] = -1;
    return fd;
  }
};

struct SpawnObjects {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnObjects() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnObjects() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

void check(int rc, const char* what) {
  if (rc != 0) throw SystemError(std::string(what), rc);
}

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

SpawnedProcess spawn_process(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  FdPair out;
  FdPair err;
  SpawnObjects so;
  // dup2 onto 1 and 2 clears O_CLOEXEC on the copies; the originals close at exec.
  check(posix_spawn_file_actions_addopen(&so.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0), "spawn actions");
  check(posix_spawn_file_actions_adddup2(&so.actions, out.fds[1], STDOUT_FILENO), "spawn actions");
  check(posix_spawn_file_actions_adddup2(&so.actions, err.fds[1], STDERR_FILENO), "spawn actions");

  // Own process group (pgid = pid); every signal unblocked and at its default action, whatever the launcher
  // blocks or ignores.
  sigset_t none;
  sigset_t all;
  sigemptyset(&none);
  sigfillset(&all);
  check(posix_spawnattr_setpgroup(&so.attr, 0), "spawn attributes");
  check(posix_spawnattr_setsigmask(&so.attr, &none), "spawn attributes");
  check(posix_spawnattr_setsigdefault(&so.attr, &all), "spawn attributes");
  check(posix_spawnattr_setflags(&so.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF),
        "spawn attributes");

  std::vector<char*> cargv = c_strings(argv);
  std::vector<char*> cenv = c_strings(env);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, cargv[0], &so.actions, &so.attr, cargv.data(), cenv.data());
  if (rc != 0) throw SystemError("cannot start '" + argv[0] + "'", rc);

  SpawnedProcess p;
  p.pid = pid;
  p.stdout_fd = out.release_read();
  p.stderr_fd = err.release_read();
  for (int fd : {p.stdout_fd, p.stderr_fd}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return p;
}

bool signal_process_group(pid_t pid, int sig) {
  if (pid <= 0) return false;
  return ::kill(-pid, sig) == 0;
}

}  // namespace dcomm::run
