// The riders of the call check: Bruck's gather and a broadcast (ride.hpp).

#include "collectives/ride.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <dcomm/error.hpp>
#include <span>
#include <utility>

#include "collectives/call_check.hpp"

namespace dcomm::coll {

namespace {

// Places sent in round k of Bruck's gather.
int places_in_round(int k, int size) { return std::min(1 << k, size - (1 << k)); }

// Every rider expects a size per round; a round of another size means the calls differ. With the check on it has
// thrown already, naming the rank; with it off this says what it can.
class ExpectedSizes {
 public:
  bool accept(std::size_t got, std::size_t want) {
    if (got == want) return true;
    mismatch_ = {got, want};
    return false;
  }
  void throw_if_mismatched(const Context& c) const {
    if (mismatch_.first == mismatch_.second) return;
    throw InvalidUsageError(fmt::format("{}: received {} in a round where {} were expected; the ranks' calls disagree "
                                        "on the count or dtype - check that every rank passes matching arguments "
                                        "(DCOMM_CHECK_CALLS=1 names the rank)",
                                        c.what, format_bytes(mismatch_.first), format_bytes(mismatch_.second)));
  }

 private:
  std::pair<std::size_t, std::size_t> mismatch_{0, 0};
};

class GatherRider final : public CheckRider {
 public:
  GatherRider(char* held, std::size_t block, int size) : held_(held), block_(block), size_(size) {}
  std::span<const char> outgoing(int k) override {
    return {held_, static_cast<std::size_t>(places_in_round(k, size_)) * block_};
  }
  void arrived(int k, std::span<const char> data) override {
    if (sizes.accept(data.size(), static_cast<std::size_t>(places_in_round(k, size_)) * block_)) {
      std::memcpy(held_ + (std::size_t{1} << k) * block_, data.data(), data.size());
    }
  }
  ExpectedSizes sizes;

 private:
  char* held_;
  std::size_t block_;
  int size_;
};

class BroadcastRider final : public CheckRider {
 public:
  BroadcastRider(char* buf, std::size_t bytes, int relative, int size)
      : buf_(buf), bytes_(bytes), relative_(relative), size_(size) {}
  // Relative ranks below 2^k hold the data in round k (the root's, and those it reached in rounds 0..k-1).
  std::span<const char> outgoing(int k) override {
    return holds(relative_, k) ? std::span<const char>(buf_, bytes_) : std::span<const char>();
  }
  // Relative rank v hears from v - 2^k (mod P), which may hold the data when v does too (the wrap past P).
  void arrived(int k, std::span<const char> data) override {
    const bool sender_holds = holds(pattern::mod(relative_ - (1 << k), size_), k);
    if (sizes.accept(data.size(), sender_holds ? bytes_ : 0) && sender_holds && !holds(relative_, k)) {
      std::memcpy(buf_, data.data(), data.size());
    }
  }
  ExpectedSizes sizes;

 private:
  static bool holds(int relative, int k) { return relative < (1 << k); }
  char* buf_;
  std::size_t bytes_;
  int relative_;
  int size_;
};

}  // namespace

bool rides_else_check(const Context& c, bool fits) {
  if (fits && c.device().is_host()) return true;
  if (c.call != nullptr) check_calls_match(c, c.call);
  return false;
}

bool gather_rides(double block_bytes, int size) {
  int most = 0;
  for (int k = 0; k < pattern::ceil_log2(size); ++k) most = std::max(most, places_in_round(k, size));
  return block_bytes * most <= static_cast<double>(kMaxRideBytes);
}

void ride_gather(const Context& c, char* held, std::size_t block_bytes) {
  GatherRider rider(held, block_bytes, c.size());
  check_calls_match(c, c.call, &rider);
  rider.sizes.throw_if_mismatched(c);
}

void ride_all_gather(const Context& c, const void* send, std::size_t count, void* recv) {
  const int p = c.size();
  RideBuffer gathered(c, static_cast<std::size_t>(p) * count);
  c.copy(gathered.data(), send, count);
  ride_gather(c, gathered.data(), count * c.esize());
  if (recv == nullptr) return;
  for (int i = 0; i < p; ++i) {  // place i holds rank (r - i) mod P's block
    c.copy(c.at(recv, static_cast<std::size_t>(pattern::mod(c.rank() - i, p)) * count),
           c.at(gathered.data(), static_cast<std::size_t>(i) * count), count);
  }
}

bool work_rides_else_check(const Context& c) {
  return rides_else_check(c, gather_rides(static_cast<double>(c.work_count * c.esize()), c.size()));
}

void ride_reduce(const Context& c, std::size_t first, std::size_t count, bool combine) {
  const int p = c.size();
  const std::size_t n = c.work_count;
  const std::size_t bytes = n * c.esize();
  RideBuffer held(c, static_cast<std::size_t>(p) * n);
  std::memcpy(held.data(), c.work, bytes);
  ride_gather(c, held.data(), bytes);
  if (!combine || count == 0) return;
  // Rank q's input sits at place (r - q) mod P.
  auto input_of = [&](int q) {
    return c.at(held.data(), static_cast<std::size_t>(pattern::mod(c.rank() - q, p)) * n + first);
  };
  char* out = c.at(c.work, first);
  if (c.rank() != 0) std::memcpy(out, input_of(0), count * c.esize());
  for (int q = 1; q < p; ++q) c.reduce(out, input_of(q), count);
}

bool broadcast_rides(double bytes) { return bytes <= static_cast<double>(kMaxRideBytes); }

void ride_broadcast(const Context& c, char* buf, std::size_t bytes, int root) {
  BroadcastRider rider(buf, bytes, pattern::mod(c.rank() - root, c.size()), c.size());
  check_calls_match(c, c.call, &rider);
  rider.sizes.throw_if_mismatched(c);
}

RideBuffer::RideBuffer(const Context& c, std::size_t count) : data_(local_) {
  if (count * c.esize() > kLocalBytes) {
    large_ = c.scratch(count);
    data_ = large_.data();
  }
}

}  // namespace dcomm::coll
