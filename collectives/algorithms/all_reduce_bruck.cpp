// all_reduce[bruck]: every rank gathers every rank's input with Bruck's all-gather and reduces the P inputs itself,
// in rank order, so every rank computes the same bits, in ⌈log₂P⌉ rounds for any P (no folding).
//   Round k = 0..⌈log₂P⌉-1: send the first min(2^k, P - 2^k) inputs held to rank r + 2^k and append as many from
//   rank r - 2^k (place i holds rank (r - i) mod P's input); then combine the inputs of ranks 0, 1, ..., P-1.
//   The rounds are the call check's own (Context::call, CheckRider): where another algorithm pays the check's
//   rounds and then its own, this one pays one set. When a round would carry more than kMaxRideBytes, or the
//   memory is on a device, it runs the check and then butterfly instead.
// Cost: ⌈log₂P⌉α + (P-1)n(β + γ) + 2(P-1)nγ for copying the inputs in and out of the check's messages; butterfly's
// plus the check's otherwise.

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include <dcomm/error.hpp>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/call_check.hpp"

namespace dcomm::coll {

namespace {

// Inputs in round k.
int blocks_in_round(int k, int size) { return std::min(1 << k, size - (1 << k)); }

bool rides(double bytes, int size) {
  int most = 0;
  for (int k = 0; k < pattern::ceil_log2(size); ++k) most = std::max(most, blocks_in_round(k, size));
  return bytes * most <= static_cast<double>(kMaxRideBytes);
}

class Gather final : public CheckRider {
 public:
  Gather(char* held, std::size_t block_bytes, int size) : held_(held), block_(block_bytes), size_(size) {}

  std::span<const char> outgoing(int k) override {
    return {held_, static_cast<std::size_t>(blocks_in_round(k, size_)) * block_};
  }
  void arrived(int k, std::span<const char> data) override {
    const std::size_t want = static_cast<std::size_t>(blocks_in_round(k, size_)) * block_;
    if (data.size() != want) {
      mismatch_ = {data.size(), want};
      return;
    }
    std::memcpy(held_ + (std::size_t{1} << k) * block_, data.data(), data.size());
  }
  /// The bytes of a round that did not have the expected size, and the expected size ({0, 0} when all had).
  std::pair<std::size_t, std::size_t> mismatch() const { return mismatch_; }

 private:
  char* held_;
  std::size_t block_;
  int size_;
  std::pair<std::size_t, std::size_t> mismatch_{0, 0};
};

}  // namespace

void run_all_reduce_bruck(Context& c) {
  const int p = c.size();
  const int r = c.rank();
  if (p == 1) return;
  const std::size_t n = c.work_count;
  const std::size_t bytes = n * c.esize();
  if (!c.device().is_host() || !rides(static_cast<double>(bytes), p)) {
    if (c.call != nullptr) check_calls_match(c, c.call);
    return run_all_reduce_butterfly(c);
  }
  // Every input lands here; small calls keep it on the stack.
  alignas(64) std::array<char, kMaxRideBytes> local;
  Scratch large;
  const std::size_t held_bytes = static_cast<std::size_t>(p) * bytes;
  char* held = local.data();
  if (held_bytes > local.size()) {
    large = c.scratch(static_cast<std::size_t>(p) * n);
    held = large.data();
  }
  std::memcpy(held, c.work, bytes);
  Gather gather(held, bytes, p);
  check_calls_match(c, c.call, &gather);
  if (auto [got, want] = gather.mismatch(); got != want) {
    // Reached only with the call check off: with it on, the check has thrown naming the rank.
    throw InvalidUsageError(fmt::format("{}: received {} of inputs in a round where {} were expected; the ranks' "
                                        "calls disagree on the count or dtype - check that every rank passes matching "
                                        "arguments (DCOMM_CHECK_CALLS=1 names the rank)",
                                        c.what, format_bytes(got), format_bytes(want)));
  }
  auto input_of = [&](int q) { return held + static_cast<std::size_t>(pattern::mod(r - q, p)) * bytes; };
  if (r != 0) std::memcpy(c.work, input_of(0), bytes);
  for (int q = 1; q < p; ++q) c.reduce(c.work, input_of(q), n);
}

double cost_all_reduce_bruck(const CostParams& p, double n, int size) {
  if (size > 1 && !rides(n, size)) return cost_all_reduce_butterfly(p, n, size) + call_check_cost(p, size);
  double others = size - 1;
  return log2_rounds(size) * p.alpha + others * n * (p.beta + 3 * p.gamma);
}

}  // namespace dcomm::coll
