// The shared-memory slots (slots.hpp): setup at group creation, and one exchange per call.

#include "collectives/slots.hpp"

#include <fmt/format.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <dcomm/error.hpp>

#include "collectives/dissemination.hpp"
#include "collectives/registry.hpp"
#include "collectives/shm_segments.hpp"
#include "common/env.hpp"
#include "common/log.hpp"

namespace dcomm::coll {

namespace {

// A CallDescriptor with the algorithm as its row in the table instead of its name: 24 bytes, so that the flag, the
// call and the first 24 bytes of data share one cache line.
struct SlotCall {
  uint8_t collective = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t vector_variant = 0;
  int32_t root = 0;
  uint64_t count = 0;
  uint32_t algorithm = 0;  ///< algorithm_index() + 1; 0: none (an invalid call's)
  uint32_t unused = 0;
  bool operator==(const SlotCall&) const = default;
};

enum class SlotState : uint8_t { kCall, kInvalid, kNoCall };

// The head of a slot; data follows at kDataOffset.
struct SlotHead {
  std::atomic<uint64_t> flag;  ///< the number of the exchange the slot holds, stored last
  uint32_t bytes;              ///< the data's size, or the invalid reason's
  SlotState state;
  uint8_t unused[3];
  SlotCall call;
};
constexpr std::size_t kDataOffset = sizeof(SlotHead);
static_assert(kDataOffset == 40, "the head and 24 bytes of data share one cache line");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "slot flags must be lock-free across processes");
// Slots start on a cache line of their own.
constexpr std::size_t kSlotStride = (kDataOffset + kSlotBytes + 63) / 64 * 64;
// The segment's name carries a call number; the cost model's probe uses 0xFFFFF.
constexpr uint64_t kSetupSeq = 0xFFFFE;

// The algorithm's row + 1 (0: none). `cache` holds the last name looked up: a group's calls mostly repeat one.
uint32_t algorithm_number(const CallDescriptor& d, CallDescriptor* cache, uint32_t* cached) {
  if (cache->collective == d.collective && std::memcmp(cache->algorithm, d.algorithm, sizeof d.algorithm) == 0) {
    return *cached;
  }
  uint32_t number = 0;
  for (const Algorithm* a : algorithms_for(static_cast<Collective>(d.collective))) {
    if (std::strncmp(a->name, d.algorithm, sizeof d.algorithm) == 0) {
      number = static_cast<uint32_t>(algorithm_index(*a) + 1);
      break;
    }
  }
  *cache = d;
  *cached = number;
  return number;
}

SlotCall compact(const CallDescriptor& d, uint32_t algorithm) {
  SlotCall s;
  s.collective = d.collective;
  s.dtype = d.dtype;
  s.op = d.op;
  s.vector_variant = d.vector_variant;
  s.root = d.root;
  s.count = d.count;
  s.algorithm = algorithm;
  return s;
}

CallDescriptor expand(const SlotCall& s) {
  CallDescriptor d;
  d.collective = s.collective;
  d.dtype = s.dtype;
  d.op = s.op;
  d.vector_variant = s.vector_variant;
  d.root = s.root;
  d.count = s.count;
  const auto& table = algorithm_table();
  if (s.algorithm > 0 && s.algorithm <= table.size()) {
    std::strncpy(d.algorithm, table[s.algorithm - 1].name, sizeof d.algorithm - 1);
  }
  return d;
}

const SlotHead& head(const char* slot) { return *reinterpret_cast<const SlotHead*>(slot); }

// What Mesh::wait_until polls: one rank's flag.
struct Awaited {
  const SlotHead* head;
  uint64_t exchange;
  int rank;
  uint64_t seq;
};

std::string describe(const void* arg) {
  const auto* a = static_cast<const Awaited*>(arg);
  return fmt::format("the shared-memory slot of rank {} for call #{} of this group", a->rank, a->seq);
}

bool flag_set(const void* arg) {
  const auto* a = static_cast<const Awaited*>(arg);
  return a->head->flag.load(std::memory_order_acquire) == a->exchange;
}

int world_rank(const GroupView& v, int q) { return v.world_ranks.empty() ? q : v.world_ranks[static_cast<std::size_t>(q)]; }

}  // namespace

std::shared_ptr<SlotChannel> SlotChannel::create(const Context& c, uint32_t step) {
  if (c.size() < 2 || !group_on_one_host(c.view) || !env::get_bool("DCOMM_SLOTS", true)) return nullptr;
  std::unique_ptr<ShmWindows> windows;
  std::string why;
  try {
    Context named(c.args, c.view, c.deadline, kSetupSeq, c.what, c.chunk_bytes);
    windows = std::make_unique<ShmWindows>(named, 2 * kSlotStride);
  } catch (const Error& e) {
    why = e.what();
  }
  // Every rank changes course alike: slots for all, or for none.
  int32_t failed =
      agree(c, step, why.empty() ? INT32_MAX : c.rank(), [](int32_t& m, int32_t t) { m = std::min(m, t); });
  if (failed != INT32_MAX) {
    if (!why.empty()) DCOMM_WARN("{}; small collectives go by messages on this group", why);
    if (c.rank() == 0) {
      DCOMM_WARN("{}: rank {} could not create its shared-memory slots: small collectives go by messages", c.what,
                 failed);
    }
    return nullptr;
  }
  Context named(c.args, c.view, c.deadline, kSetupSeq, c.what, c.chunk_bytes);
  windows->map_peers(named);
  const auto rounds = static_cast<uint32_t>(pattern::ceil_log2(c.size()));
  agree(c, step + rounds, uint8_t{0}, [](uint8_t&, uint8_t) {});  // every rank has mapped every segment
  windows->unlink_mine();
  return std::shared_ptr<SlotChannel>(new SlotChannel(std::move(windows), c.rank(), c.size()));
}

SlotChannel::SlotChannel(std::unique_ptr<ShmWindows> windows, int rank, int size)
    : windows_(std::move(windows)), rank_(rank), size_(size) {}

SlotChannel::~SlotChannel() = default;

char* SlotChannel::slot(int q, uint64_t exchange) const { return windows_->of(q) + (exchange % 2) * kSlotStride; }

void SlotChannel::exchange(const Context& c, const CallDescriptor* mine, std::string_view invalid, const void* data,
                           std::size_t bytes) {
  if (bytes > kSlotBytes) {
    throw Error(ErrorCode::kInternal,
                fmt::format("{}: {} do not fit a shared-memory slot ({} at most)", c.what, format_bytes(bytes),
                            format_bytes(kSlotBytes)));
  }
  const uint64_t n = ++exchanges_;
  char* own = slot(rank_, n);
  auto* h = reinterpret_cast<SlotHead*>(own);
  if (!invalid.empty()) {
    h->state = SlotState::kInvalid;
    bytes = std::min(invalid.size(), kMaxReasonBytes);
    data = invalid.data();
  } else {
    h->state = mine != nullptr ? SlotState::kCall : SlotState::kNoCall;
  }
  h->call = mine != nullptr ? compact(*mine, algorithm_number(*mine, &cached_call_, &cached_algorithm_)) : SlotCall{};
  h->bytes = static_cast<uint32_t>(bytes);
  if (bytes != 0) std::memcpy(own + kDataOffset, data, bytes);
  h->flag.store(n, std::memory_order_release);
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    Awaited awaited{&head(slot(q, n)), n, q, c.seq};
    if (!flag_set(&awaited)) c.view.mesh->wait_until(flag_set, describe, &awaited, world_rank(c.view, q), c.deadline, c.what);
  }
  if (mine == nullptr) return;
  // The check: every rank sees every call, and throws the same error.
  const SlotHead& low = head(slot(0, n));
  int bad = -1;
  for (int q = 0; q < size_; ++q) {
    const SlotHead& theirs = head(slot(q, n));
    if (theirs.state == SlotState::kInvalid) {
      throw_invalid_call(c, q, std::string_view(slot(q, n) + kDataOffset, std::min<std::size_t>(theirs.bytes, kMaxReasonBytes)));
    }
    if (theirs.state == SlotState::kNoCall) {
      throw InvalidUsageError(fmt::format("{}: rank {} has the call check off (call #{} of this group); "
                                          "DCOMM_CHECK_CALLS must be alike on every rank",
                                          c.what, q, c.seq));
    }
    if (bad < 0 && !(theirs.call == low.call)) bad = q;
  }
  if (bad >= 0) throw_mismatched_calls(c, bad, expand(head(slot(bad, n)).call), 0, expand(low.call));
}

const char* SlotChannel::data(const Context& c, int q, std::size_t expected) const {
  const char* s = slot(q, exchanges_);
  if (head(s).bytes != expected || head(s).state == SlotState::kInvalid) {
    throw InvalidUsageError(fmt::format("{}: rank {} published {} in its shared-memory slot where {} were expected; the "
                                        "ranks' calls disagree on the count or dtype - check that every rank passes "
                                        "matching arguments (DCOMM_CHECK_CALLS=1 names the rank)",
                                        c.what, q, format_bytes(head(s).bytes), format_bytes(expected)));
  }
  return s + kDataOffset;
}

}  // namespace dcomm::coll
