#pragma once
// Where every rank is when a collective times out. The rank whose wait ran out asks the others through the store
// (the flight recorder's "fr/request" counter); each rank's HangResponder thread answers with its dump under
// "fr/<request>/<rank>" within ~100 ms, whatever its main thread is doing (inside user code, blocked in a
// collective). The asker then says which ranks never reached the call:
//   "ranks 0, 2, 3 are in all_reduce #42 for 10.0 s; rank 1 last finished all_reduce #41 and is in user code for
//    9.8 s"
// and a rank that cannot answer (stopped, dead) is named with what dcomm-run or the process table says of it.
// The report goes to "fr/report" (dcomm-run prints it) and the rank that holds up the call is recorded as the
// root cause (rendezvous/failure_record.hpp), so the ranks still waiting fail at once blaming it.

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <dcomm/store.hpp>

#include "runtime/flight_recorder.hpp"
#include "transports/mesh.hpp"

namespace dcomm::runtime {

/// Answers flight-recorder requests for this process (one thread per world), and writes the dump at exit when
/// DCOMM_FLIGHT_RECORDER_DUMP is set ("stderr", or a path: text, or JSON when it ends in .json).
class HangResponder {
 public:
  /// `store`: the failure store (null: no thread; only the dump at exit).
  HangResponder(std::shared_ptr<Store> store, std::shared_ptr<FlightRecorders> recorders, int rank, int world_size);
  ~HangResponder();
  HangResponder(const HangResponder&) = delete;
  HangResponder& operator=(const HangResponder&) = delete;

 private:
  void loop();
  void dump_at_exit() const noexcept;

  std::shared_ptr<Store> store_;
  std::shared_ptr<FlightRecorders> recorders_;
  int rank_;
  int world_size_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

/// Asks every rank of `group` where it is, after this rank's call `seq` timed out; returns the one-line report
/// (also published, with the root cause it finds). Returns an earlier report of this round when there is one.
/// Bounded: at most ~0.3 s. Never throws.
std::string report_hang(Store& store, const FlightRecorders& recorders, const FlightRecorder& group,
                        const transport::Mesh& mesh, uint64_t seq) noexcept;

/// The report of this round, if a rank wrote one.
std::string published_report(Store& store) noexcept;

}  // namespace dcomm::runtime
