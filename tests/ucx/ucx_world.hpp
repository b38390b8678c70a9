#pragma once
// A small world of ucx transports for tests: ranks are threads of this process, each with its own UCP context and
// worker, connected through one memory store. Rank threads never assert (Catch2 is not thread-safe): they record
// failures, and run_ucx_world() returns them for the main thread to check.

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "common/deadline.hpp"
#include "transports/transport.hpp"

namespace dcomm::test {

/// An ArrivalSink that keeps announced messages in arrival order.
class Collector : public transport::ArrivalSink {
 public:
  void arrived(transport::Transport&, const transport::Incoming& msg) override { queue.push_back(msg); }
  std::deque<transport::Incoming> queue;
};

/// Byte `i` of message `index` from `rank`: differs per rank, message and position, and is never constant.
uint8_t pattern_byte(int rank, uint64_t index, std::size_t i);
std::vector<uint8_t> pattern(int rank, uint64_t index, std::size_t bytes);
/// "" when `got` is pattern(rank, index, bytes), else where the first difference is.
std::string check_pattern(const uint8_t* got, std::size_t bytes, int rank, uint64_t index);

class UcxRank {
 public:
  UcxRank(int rank, int size, transport::Transport& t) : rank_(rank), size_(size), t_(t) {}
  int rank() const { return rank_; }
  int size() const { return size_; }
  transport::Transport& transport() { return t_; }
  Collector& sink() { return sink_; }

  /// One progress() call, backing off when nothing happened.
  void progress();
  transport::OpPtr send(int peer, uint64_t tag, const void* data, std::size_t bytes);
  /// Progresses until `op` finishes; throws its failure, or TimeoutError at `timeout`.
  void wait(const transport::OpPtr& op, Duration timeout = std::chrono::seconds(60));
  /// Progresses until a message has been announced and takes the oldest.
  transport::Incoming next(Duration timeout = std::chrono::seconds(60));
  /// Receives an announced message into `dst` and waits for it.
  void receive(const transport::Incoming& msg, void* dst);
  /// Records a failure for the main thread.
  void fail(const std::string& what);

  std::vector<std::string> failures;

 private:
  int rank_;
  int size_;
  transport::Transport& t_;
  Collector sink_;
  Backoff backoff_;
};

/// Runs `body` on `n` ranks as threads over ucx, then a barrier (progressing), then close. Returns every failure
/// recorded or thrown, each prefixed "rank r: ".
std::vector<std::string> run_ucx_world(int n, const std::function<void(UcxRank&)>& body);

/// All failures joined, for Catch2's INFO.
std::string join(const std::vector<std::string>& lines);

}  // namespace dcomm::test
