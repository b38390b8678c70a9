#include "common/process.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

namespace dcomm {

ProcessState local_process_state(int pid) {
  if (pid <= 0 || pid == ::getpid()) return ProcessState::kRunning;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return ProcessState::kExited;
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return ProcessState::kRunning;
  // The state follows the command name, which is in parentheses and may itself contain ") ".
  std::size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return ProcessState::kRunning;
  switch (line[close + 2]) {
    case 'Z':
    case 'X': return ProcessState::kExited;
    case 'T':
    case 't': return ProcessState::kStopped;
    default: return ProcessState::kRunning;
  }
}

}  // namespace dcomm
