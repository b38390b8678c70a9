// dcomm-run: a torchrun-like launcher. See docs/launcher.md.

#include <cstdio>
#include <exception>
#include <string>

#include <dcomm/error.hpp>

#include "common/log.hpp"

#include "tools/run/launcher.hpp"
#include "tools/run/options.hpp"
#include "tools/run/rank_exec.hpp"
#include "tools/run/signals.hpp"
#include "tools/run/summary.hpp"
#include "tools/run/torch_compat.hpp"

int main(int argc, char** argv) {
  using namespace dcomm::run;
  if (argc > 1 && std::string(argv[1]) == kExecRankFlag) return exec_rank_main(argc, argv);
  try {
    // The store server and the rendezvous log through dcomm's logger: mark those lines as the launcher's own.
    dcomm::log::set_line_prefix("dcomm-run: ");
    // Before anything can start a thread (the store server), so that every thread keeps these signals blocked.
    SignalWatcher signals;
    CommandLine cl = parse_command_line(argc, argv);
    if (cl.show_help) {
      std::fputs(cl.help.c_str(), stdout);
      return kExitSuccess;
    }
    if (std::string where = prepare_log_dir(&cl.options); !where.empty()) std::fprintf(stderr, "%s\n", where.c_str());
    return run_launcher(cl.options, signals);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "dcomm-run: error: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dcomm-run: error: %s\n", e.what());
    return kExitLauncherError;
  }
}
