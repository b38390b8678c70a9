#pragma once
// Starting one rank with posix_spawn (the launcher has threads once it hosts the store, so it never forks).
// The child gets its own process group, so the launcher can signal the rank and everything it started as one;
// its stdout and stderr are pipes the launcher reads; its stdin is /dev/null (a background process group must
// not read the terminal).

#include <sys/types.h>

#include <string>
#include <vector>

namespace dcomm::run {

struct SpawnedProcess {
  pid_t pid = -1;
  int stdout_fd = -1;  ///< read end of the child's stdout pipe, non-blocking, owned by the caller
  int stderr_fd = -1;  ///< read end of the child's stderr pipe, non-blocking, owned by the caller
};

/// Starts argv[0] (searched on PATH) with exactly `env`. Throws dcomm::SystemError naming the program when it
/// cannot be started (not found, not executable).
SpawnedProcess spawn_process(const std::vector<std::string>& argv, const std::vector<std::string>& env);

/// Sends sig to the process group of a child started by spawn_process. Returns false if the group is gone.
bool signal_process_group(pid_t pid, int sig);

}  // namespace dcomm::run
