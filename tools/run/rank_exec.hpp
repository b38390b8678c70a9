#pragma once
// How a rank notices that its launcher died. posix_spawn cannot set PR_SET_PDEATHSIG, so dcomm-run spawns itself
// in a hidden mode that sets it (SIGKILL when the launcher's thread that spawned it exits, which lasts as long
// as the launcher) and then executes the program; the setting survives exec. Ranks' own children are reached
// through the process group when the launcher stops a round, not when the launcher is killed.

#include <sys/types.h>

#include <string>
#include <vector>

namespace dcomm::run {

/// The hidden first argument that selects the mode: dcomm-run --exec-rank LAUNCHER_PID program args...
inline constexpr const char* kExecRankFlag = "--exec-rank";

/// The argv that starts `command` through the hidden mode of this executable.
std::vector<std::string> exec_rank_argv(const std::vector<std::string>& command);

/// The hidden mode: argv is dcomm-run's own. Never returns on success; returns 127 if the program cannot run.
int exec_rank_main(int argc, char** argv);

/// The program's path as execvp would find it, or "" when it is not an executable file; *error says why.
std::string resolve_program(const std::string& name, std::string* error);

}  // namespace dcomm::run
