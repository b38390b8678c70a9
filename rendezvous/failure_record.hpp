#pragma once
// The world's root cause, recorded once in the store so that every rank blames the same rank.
//
// When a rank dies, its peers learn it at different times and in different ways: one sees the process exit,
// another sees only that a survivor closed its transport (because that survivor failed first), a third sees a
// UCX endpoint timeout. Each would blame the peer it was waiting on. Instead, whoever knows first and for
// certain writes the root cause under one key with compare-and-set (the first writer wins):
//   dcomm-run         the moment it reaps a rank that failed (it is the parent: it knows the pid and the signal)
//   a rank            that saw a peer's process exit on its host, or whose timeout found the rank that never
//                     reached the call (the flight recorder, runtime/)
// and every rank that fails reads it and names that rank first, then what it saw itself. Waits during
// rendezvous and mesh setup poll it too, so a rank that died during startup is named within a fraction of a
// second instead of after the whole timeout.
//
// Key (under the run's prefix "<run id>/<restart>/"): failure/root = one JSON object (FailureRecord).

#include <optional>
#include <string>
#include <vector>

#include <dcomm/store.hpp>

#include "common/deadline.hpp"

namespace dcomm::rdzv {

inline constexpr const char* kFailureKey = "failure/root";

struct FailureRecord {
  int rank = -1;          ///< the world rank that failed first
  int pid = 0;
  std::string host;
  std::string what;       ///< "was killed by signal 9 (SIGKILL)", "exited (process 1234 is gone)"
  std::string reporter;   ///< "dcomm-run", "rank 2"
  bool timeout = false;   ///< it is stuck (a timeout found it), not dead

  /// "rank 3 (pid 1234 on host vm) was killed by signal 9 (SIGKILL) (seen by dcomm-run)".
  std::string describe() const;
};

std::string encode_failure(const FailureRecord& r);
/// nullopt when the text is not a failure record.
std::optional<FailureRecord> decode_failure(const std::string& text);

/// Records `r` as the world's root cause unless one is recorded already; returns the record that holds (ours or
/// the earlier one), or nullopt when the store cannot be reached. Never throws.
std::optional<FailureRecord> publish_failure(Store& store, const FailureRecord& r) noexcept;
/// The recorded root cause, if any. Never throws (a store that cannot be reached reads as no record).
std::optional<FailureRecord> read_failure(Store& store) noexcept;

/// Where a wait looks for the root cause: the store holding failure/root (null: nowhere) and the waiting rank.
struct FailureWatch {
  Store* store = nullptr;
  int self = -1;
};

/// Store::wait for `keys`, in short slices, reading the recorded root cause between them: a failure of a rank
/// other than `watch.self` throws RemoteError "<what>: rank R failed first: ..." at once. At the deadline it throws
/// the store's TimeoutError. With no watch store it is a plain Store::wait.
void wait_watching_failures(Store& store, const std::vector<std::string>& keys, const Deadline& deadline,
                            const FailureWatch& watch, const std::string& what);

}  // namespace dcomm::rdzv
