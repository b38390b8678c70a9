#include "tools/run/rank_exec.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <dcomm/error.hpp>

namespace dcomm::run {
namespace {

std::string self_executable() {
  char path[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) throw SystemError("dcomm-run: readlink /proc/self/exe (to start ranks through dcomm-run)", errno);
  return std::string(path, static_cast<std::size_t>(n));
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::vector<std::string> exec_rank_argv(const std::vector<std::string>& command) {
  static const std::string self = self_executable();
  std::vector<std::string> argv = {self, kExecRankFlag, std::to_string(::getpid())};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

std::string resolve_program(const std::string& name, std::string* error) {
  if (name.find('/') != std::string::npos) {
    if (is_executable_file(name)) return name;
    *error = ::access(name.c_str(), F_OK) != 0 ? "no such file" : "not an executable file";
    return "";
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    start = end + 1;
  }
  *error = "not found on PATH";
  return "";
}

int exec_rank_main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "dcomm-run: error: %s is dcomm-run's own; usage: dcomm-run [options] -- program\n",
                 kExecRankFlag);
    return 2;
  }
  const pid_t launcher = static_cast<pid_t>(std::atol(argv[2]));
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The launcher may have died before the line above: then nobody would deliver the signal.
  if (::getppid() != launcher) return 1;
  ::execvp(argv[3], argv + 3);
  std::fprintf(stderr, "dcomm-run: error: cannot start '%s': %s\n", argv[3], std::strerror(errno));
  return 127;
}

}  // namespace dcomm::run
