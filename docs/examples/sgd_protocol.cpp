#include "sgd_protocol.hpp"

#include <algorithm>
#include <cstdio>
#include <thread>

namespace examples {

const char* to_string(Variant v) {
  switch (v) {
    case Variant::kFullySync:
      return "fully-sync";
    case Variant::kKSync:
      return "K-sync";
    case Variant::kKBatchSync:
      return "K-batch-sync";
    case Variant::kAsync:
      return "async";
    case Variant::kKAsync:
      return "K-async";
    case Variant::kKBatchAsync:
      return "K-batch-async";
  }
  return "?";
}

bool parse_variant(const std::string& name, Variant* out) {
  for (Variant v : kAllVariants) {
    if (name == to_string(v)) {
      *out = v;
      return true;
    }
  }
  return false;
}

VariantRule rule_of(Variant v, int learners, int k) {
  switch (v) {
    case Variant::kFullySync:
      return {true, false, learners};
    case Variant::kKSync:
      return {true, false, k};
    case Variant::kKBatchSync:
      return {true, true, k};
    case Variant::kAsync:
      return {false, false, 1};
    case Variant::kKAsync:
      return {false, false, k};
    case Variant::kKBatchAsync:
      return {false, true, k};
  }
  return {true, false, learners};
}

void SendQueue::prune() {
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [](const Pending& p) {
                                  if (!p.work->is_completed()) return false;
                                  if (p.work->exception()) std::rethrow_exception(p.work->exception());
                                  return true;
                                }),
                 pending_.end());
}

void SendQueue::wait_all(dcomm::Duration timeout) {
  for (const Pending& p : pending_) p.work->wait(timeout);
  pending_.clear();
}

void poll_pause(unsigned* polls) {
  // Yield for the first polls (a message is often just about to land), then sleep with growing pauses (up to 256 us) so
  // that a waiting rank leaves the cores to the ranks that compute.
  ++*polls;
  if (*polls < 16) {
    std::this_thread::yield();
    return;
  }
  const unsigned shift = std::min(*polls - 16, 3u);  // at most 256 us: a late wake-up delays the whole round
  std::this_thread::sleep_for(std::chrono::microseconds(32u << shift));
}

void throw_poll_timeout(const std::string& what, dcomm::Duration timeout) {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f s", static_cast<double>(timeout.count()) / 1000.0);
  throw dcomm::TimeoutError(what + ": not done after " + seconds + " (--timeout-s)" +
                            "; a peer may have exited or stopped answering - check the other ranks' output");
}

}  // namespace examples
