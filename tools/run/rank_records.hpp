#pragma once
// What dcomm-run tells the ranks of a round through their store, and reads back from it. The ranks' keys live
// under "<run id>/<restart>/" (rendezvous/bootstrap.hpp):
//   failure/root          the round's root cause (rendezvous/failure_record.hpp): dcomm-run writes it the moment
//                         it reaps a rank that died, so survivors blocked anywhere (rendezvous, mesh setup, a
//                         collective) name that rank within a fraction of a second
//   launcher/stopped/<r>  set while rank r is stopped by a signal (SIGSTOP, a debugger), for the flight recorder
//   fr/report             the flight recorder's report of a timeout (runtime/flight_recorder.hpp), for the summary
// and, after the round, what the ranks' shared-memory segments left in /dev/shm if one died during setup.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <dcomm/store.hpp>

#include "common/deadline.hpp"
#include "tools/run/rank_env.hpp"
#include "tools/run/summary.hpp"

namespace dcomm::run {

class RankRecords {
 public:
  /// `store`: an unprefixed client of the ranks' store, or null (then every call does nothing).
  RankRecords(std::shared_ptr<Store> store, const RoundInfo& round);

  /// How long a rank that exited with an error code waits before it is recorded: it most likely exited because
  /// a peer died, and that peer (killed by a signal) may become a zombie a moment later than it.
  static constexpr Duration kExitCodeDelay = std::chrono::milliseconds(200);

  /// Records `e` (a rank that failed on its own, not one dcomm-run stopped) as the root cause if none is yet: a
  /// death by signal at once, an error exit after kExitCodeDelay (flush_pending()).
  void rank_failed(const RankExit& e) noexcept;
  /// Records the error exits whose delay has passed. Call it from the supervision loop.
  void flush_pending() noexcept;
  /// When flush_pending() has something to do next (time_point::max(): nothing pending).
  Clock::time_point next_pending() const noexcept;
  /// The rank recorded as the root cause, if any.
  std::optional<int> root_rank() noexcept;
  /// Marks rank `rank` stopped by `sig` (or no longer: sig 0).
  void rank_stopped(int rank, int sig) noexcept;
  /// The shrinks the ranks recorded (runtime/shrink.cpp: shrink/<n> under the round's prefix), in order.
  std::vector<std::string> shrinks() noexcept;
  /// The flight recorder's report of this round, if a rank wrote one.
  std::optional<std::string> flight_report() noexcept;
  /// The rank a flight recorder found holding up a call that timed out ("held up all_reduce #42 ..."), if any.
  std::optional<std::pair<int, std::string>> hang_culprit() noexcept;

 private:
  void publish(const RankExit& e) noexcept;

  std::shared_ptr<Store> store_;
  std::vector<std::pair<Clock::time_point, RankExit>> pending_;
};

/// An unprefixed client of the store at addr:port with the launcher's secret and job (opts), or null when it cannot be reached within a few seconds.
std::shared_ptr<Store> connect_rank_store(const std::string& addr, int port, TcpStoreOptions opts) noexcept;

/// Removes what this round's ranks left in /dev/shm: the transport segments of run `run_id` and the collectives'
/// windows of the processes `pids`. Returns the names removed.
std::vector<std::string> remove_leftover_segments(const std::string& run_id, const std::vector<int>& pids) noexcept;

}  // namespace dcomm::run
