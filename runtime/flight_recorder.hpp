#pragma once
// The flight recorder: per group, the last N collectives this rank ran (sequence number, collective, algorithm,
// dtype, count, root, state, start and end), always on. Recording costs a coarse clock read at the start and one at
// the end (CLOCK_MONOTONIC_COARSE: to a few ms; none at the end of a small call that never waited: end(at_start))
// and a few plain stores per call - no lock and no locked
// instruction: each entry is written under its own stamp (a sequence lock per entry), which a reader checks before
// and after its copy and retries on a change, and a call's end then changes two whole words of it outside the stamp
// (its algorithm, and its end time and state in one word), which a reader takes as they are; nothing is formatted
// until someone asks. A rank is asked (runtime/hang_report.hpp) when a peer's collective times out, and dumps at exit
// when DCOMM_FLIGHT_RECORDER_DUMP names a file or "stderr".
// The dump formats (text and JSON) are in docs/errors.md. Anchors: torch's flight recorder, NCCL's RAS.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <dcomm/process_group.hpp>

#include "common/deadline.hpp"

namespace dcomm::runtime {

class FlightRecorder {
 public:
  enum class State : uint8_t { kRunning, kDone, kFailed };
  struct Entry {
    uint64_t seq = 0;
    Collective coll = Collective::kAllReduce;
    const char* algorithm = nullptr;  ///< static storage (the algorithm table); null until chosen
    DType dtype = DType::kUInt8;
    std::size_t count = 0;
    int root = 0;
    State state = State::kRunning;
    Clock::time_point start{}, end{};
  };
  /// Where this rank is in the group, as of `now`.
  struct Position {
    bool in_call = false;       ///< inside a collective (the newest entry is running)
    bool any = false;           ///< the group has run anything
    Entry newest;               ///< the running call, or the last one that ended
    Duration for_time{};        ///< how long it has been running, or how long since it ended
  };

  /// `label`: "group 0"; `world_ranks`: the group's members. Capacity from DCOMM_FLIGHT_RECORDER_ENTRIES (64).
  FlightRecorder(uint32_t context, std::vector<int> world_ranks);

  /// `start`: when the call started (the call's deadline's start: a clock read fewer).
  void begin(uint64_t seq, Collective coll, DType dtype, std::size_t count, int root, Clock::time_point start);
  /// `at_start`: the call ended within the coarse clock's tick of its start (a small call that never waited: a few
  /// microseconds of its own work against a tick of 1-10 ms), so its end is its start, without a second clock read.
  void end(bool ok, bool at_start = false);
  /// The engine stores the algorithm it chose here (collectives/engine.hpp, Args::chosen_algorithm).
  std::atomic<const char*>* algorithm_slot() { return &algorithm_; }

  uint32_t context() const { return context_; }
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  Position position(Clock::time_point now) const;
  /// {"context", "ranks", "in_call", "entries": [{"seq", "collective", "algorithm", "dtype", "count", "root",
  /// "state", "started_s_ago", "duration_s"}]}: oldest first.
  nlohmann::json to_json(Clock::time_point now) const;

  // The words a call's end changes (end()): its algorithm, and its end word - the end time and the state together
  // (end_word()); begin() writes the end word zero (running). load() takes the state and the end from the end word,
  // not from the state's own byte (beside the root, written by begin() alone). The end word: the end time's ticks
  // shifted by two, the state in the low two bits. A tick is a nanosecond of the steady clock, so 62 bits hold 146
  // years of uptime.
  static constexpr std::size_t kAlgorithmWord = offsetof(Entry, algorithm) / sizeof(uint64_t);
  static constexpr std::size_t kEndWord = offsetof(Entry, end) / sizeof(uint64_t);
  static constexpr uint64_t kEndRunning = 0, kEndDone = 1, kEndFailed = 2;
  static uint64_t end_word(Clock::time_point end, bool ok) {
    static_assert(std::is_same_v<Clock::period, std::nano> && std::is_signed_v<Clock::rep>, "end_word() packs ticks");
    return static_cast<uint64_t>(end.time_since_epoch().count()) << 2 | (ok ? kEndDone : kEndFailed);
  }

 private:
  /// An entry as words, each stored and loaded atomically (relaxed), so a reader that races the writer reads
  /// defined values and tells by the stamp that it must retry.
  static constexpr std::size_t kWords = 8;
  struct Slot {
    /// Odd while the writer writes here, even otherwise; every write (a call's begin and its end) adds 2, so a
    /// reader that sees the same even stamp before and after its copy read one write's words.
    std::atomic<uint64_t> stamp{0};
    std::atomic<uint64_t> index{0};  ///< which entry the words are: i + 1 (0: none yet)
    std::atomic<uint64_t> words[kWords];
  };
  /// Writes entry `index` into its slot `at` (index mod size_; the writer: one thread at a time, the one running
  /// the group's call). Inline, as begin() is: every call of the group runs it.
  void store(uint64_t index, std::size_t at, const Entry& e);
  /// Runs `write` under the slot's stamp (see Slot).
  template <typename Write>
  static void under_stamp(Slot& slot, Write write);
  /// Entry `index`, when its slot still holds it: false when a later entry replaced it (or none was written).
  bool load(uint64_t index, Entry& out) const;

  uint32_t context_;
  std::vector<int> world_ranks_;
  std::unique_ptr<Slot[]> ring_;
  std::size_t size_ = 0;
  Clock::time_point newest_start_{};  ///< the newest entry's start, as begin() wrote it (end() is never before it)
  std::size_t newest_slot_ = 0;  ///< its slot: recorded_ - 1 mod size_, kept without a division on the call's path
  std::atomic<uint64_t> recorded_{0};  ///< entries ever begun; the newest is entry recorded_ - 1
  std::atomic<const char*> algorithm_{nullptr};
};

// Writes under the slot's sequence lock: odd while written. The release fence keeps the words' stores after the odd
// stamp; the even stamp's release store keeps them before it. One writer at a time: plain stores, no lock.
template <typename Write>
inline void FlightRecorder::under_stamp(Slot& slot, Write write) {
  const uint64_t stamp = slot.stamp.load(std::memory_order_relaxed);
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer does not model fences (GCC refuses them under -fsanitize=thread, as in shm_pipe.cpp): an
  // acquire read-modify-write keeps the words' stores after the odd stamp the same way.
  slot.stamp.fetch_add(1, std::memory_order_acq_rel);
#else
  slot.stamp.store(stamp + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
#endif
  write();
  slot.stamp.store(stamp + 2, std::memory_order_release);
}

inline void FlightRecorder::store(uint64_t index, std::size_t at, const Entry& e) {
  Slot& slot = ring_[at];
  uint64_t w[kWords];
  std::memcpy(w, &e, sizeof w);
  under_stamp(slot, [&] {
    slot.index.store(index + 1, std::memory_order_relaxed);
    // Word by word, written out: the loop of eight relaxed stores was not unrolled, and every call runs this.
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (slot.words[I].store(w[I], std::memory_order_relaxed), ...);
    }(std::make_index_sequence<kWords>{});
  });
}

inline void FlightRecorder::begin(uint64_t seq, Collective coll, DType dtype, std::size_t count, int root,
                                  Clock::time_point start) {
  algorithm_.store(nullptr, std::memory_order_relaxed);
  const uint64_t index = recorded_.load(std::memory_order_relaxed);
  // Timestamps from the coarse clock (common/deadline.hpp): reports print tenths of seconds.
  newest_start_ = start;
  newest_slot_ = index == 0 || newest_slot_ + 1 == size_ ? 0 : newest_slot_ + 1;
  store(index, newest_slot_, Entry{seq, coll, nullptr, dtype, count, root, State::kRunning, start, {}});  // running
  recorded_.store(index + 1, std::memory_order_release);
}

inline void FlightRecorder::end(bool ok, bool at_start) {
  static_assert(kAlgorithmWord != kEndWord && offsetof(Entry, algorithm) % sizeof(uint64_t) == 0 &&
                    offsetof(Entry, end) % sizeof(uint64_t) == 0,
                "end() writes the algorithm and the end as whole words");
  if (recorded_.load(std::memory_order_relaxed) == 0) return;
  // Two whole words, not the stamp's rewrite (a reader takes each as it is: load()). The stamp's odd and even stores
  // at every call's end, right after the call's store to its shared-memory slot, kept a rank's 8 B rooted calls in
  // step with the other rank's: broadcast on 2 ranks bound 0.17 us a call with them, 0.10 with these two stores
  // (docs/benchmark.md, session 24). Inline, as begin() is: every call runs it.
  Slot& slot = ring_[newest_slot_];
  slot.words[kAlgorithmWord].store(reinterpret_cast<uintptr_t>(algorithm_.load(std::memory_order_relaxed)),
                                   std::memory_order_relaxed);
  // Both times are the coarse clock's (the caller's start): never an end before the start all the same.
  const Clock::time_point end = at_start ? newest_start_ : std::max(coarse_now(), newest_start_);
  slot.words[kEndWord].store(end_word(end, ok), std::memory_order_release);
}

/// Every group recorder of one process's world, for dumps. It keeps them for the world's life, so a dump at exit
/// still shows groups already destroyed (a recorder is a few KiB).
class FlightRecorders {
 public:
  std::shared_ptr<FlightRecorder> add(uint32_t context, std::vector<int> world_ranks);
  /// One rank's dump: {"rank", "world_size", "pid", "host", "time" (ISO 8601 UTC), "groups": [...]}.
  nlohmann::json dump(int rank, int world_size) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<FlightRecorder>> groups_;
};

/// A dump as people read it (one line per group, then one per entry).
std::string dump_text(const nlohmann::json& dump);
/// "all_reduce #42" (the call a position names).
std::string call_name(const nlohmann::json& entry);

}  // namespace dcomm::runtime
