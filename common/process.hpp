#pragma once
// What a local process is doing, as far as this process can tell from the outside: the one place that reads
// the process table for liveness (the transports' peer checks, the mesh's blame rules, the flight recorder).

namespace dcomm {

enum class ProcessState {
  kRunning,  ///< alive (or unknown: another user's process, no /proc): never a false alarm
  kStopped,  ///< stopped by a signal (SIGSTOP, SIGTSTP) or a debugger: alive, but it makes no progress
  kExited,   ///< gone from the process table, or a zombie its parent has not reaped yet
};

/// The state of process `pid` on this host. This process itself, and pid <= 0, are kRunning.
ProcessState local_process_state(int pid);

}  // namespace dcomm
