// The shared-memory slots (slots.hpp): setup at group creation, and one exchange per call (the pending checks:
// slot_checks.cpp; the segments' layout: slot_layout.hpp).

#include "collectives/slots.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <type_traits>
#include <dcomm/error.hpp>

#include "collectives/dissemination.hpp"
#include "collectives/registry.hpp"
#include "collectives/shm_segments.hpp"
#include "collectives/slot_layout.hpp"
#include "common/env.hpp"
#include "common/log.hpp"

namespace dcomm::coll {

using namespace slot_layout;

namespace {

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

// A hint that this core will write the line at `p` soon (PREFETCHW: the line comes exclusive, other cores' copies
// invalidated); no effect on what any rank reads.
inline void prefetch_for_write(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}

// What Mesh::wait_until polls before this rank runs kCallsAhead + 1 calls ahead of another: that rank's flag of an
// exchange, reached or passed (a slot's flags only grow).
struct Reached {
  const SlotHead* head;
  uint64_t exchange;
  int rank;
  uint64_t seq;       ///< the call that waits
  uint64_t past_seq;  ///< the call of that exchange
};

bool flag_reached(const void* arg) {
  const auto* r = static_cast<const Reached*>(arg);
  return r->head->flag.load(std::memory_order_acquire) >= r->exchange;
}

std::string describe_reached(const void* arg) {
  const auto* r = static_cast<const Reached*>(arg);
  return fmt::format("the shared-memory slot of rank {} for call #{} of this group (call #{} waits: a rank runs at "
                     "most {} calls ahead of the others)",
                     r->rank, r->past_seq, r->seq, kCallsAhead);
}

}  // namespace

std::shared_ptr<SlotChannel> SlotChannel::create(const Context& c, uint32_t step) {
  if (c.size() < 2 || !group_on_one_host(c.view) || !env::get_bool("DCOMM_SLOTS", true)) return nullptr;
  std::unique_ptr<ShmWindows> windows;
  std::string why;
  try {
    Context named(c.args, c.view, c.deadline, kSetupSeq, c.what, c.chunk_bytes);
    windows = std::make_unique<ShmWindows>(named, kSegmentBytes);
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
    : windows_(std::move(windows)),
      rank_(rank),
      size_(size),
      seen_(static_cast<std::size_t>(size), 0) {
  for (int q = 0; q < size; ++q) bases_.push_back(windows_->of(q));
}

SlotChannel::~SlotChannel() = default;

// Inlined into exchange(), as receive() is: an 8 B call's path is counted in instructions (docs/benchmark.md).
[[gnu::always_inline]] inline void SlotChannel::publish(uint64_t n, const SlotPlan& plan, const void* data,
                                                      std::size_t bytes) {
  char* own = slot(rank_, n);
  auto* h = reinterpret_cast<SlotHead*>(own);
  h->state = static_cast<SlotState>(plan.state);
  h->note = note_;
  std::memcpy(&h->call, plan.call, sizeof h->call);
  h->bytes = static_cast<uint32_t>(bytes);
  copy_bytes(slot_data(rank_, n, bytes), data, bytes);
  h->flag.store(n, std::memory_order_release);
}

SlotPlan SlotChannel::plan(std::string_view what, const CallDescriptor* mine, std::string_view invalid,
                           std::size_t bytes, int reads) {
  if (bytes > kSlotBytes) {
    throw Error(ErrorCode::kInternal,
                fmt::format("{}: {} do not fit a shared-memory slot ({} at most)", what, format_bytes(bytes),
                            format_bytes(kSlotBytes)));
  }
  SlotPlan p;
  if (!invalid.empty()) reads = kReadAll;  // it throws the check's error, as every rank that reads it does
  if (reads >= 0 && size_ == 2) reads = kReadAll;  // the one other rank: seen in full
  p.reads = reads;
  p.bytes = bytes;
  p.checked = mine != nullptr;
  p.state = static_cast<uint8_t>(!invalid.empty() ? SlotState::kInvalid
                                 : mine != nullptr ? SlotState::kCall
                                                   : SlotState::kNoCall);
  const SlotCall call =
      mine != nullptr ? compact(*mine, algorithm_number(*mine, &cached_call_, &cached_algorithm_)) : SlotCall{};
  static_assert(sizeof call == sizeof p.call && std::is_trivially_copyable_v<SlotCall>, "a plan holds a SlotCall");
  std::memcpy(p.call, &call, sizeof call);
  return p;
}

void SlotChannel::wait_for_room(const Context& c, uint64_t n) {
  // Every other rank has published exchange n - kCallsAhead, so it is done with every exchange before it: its
  // reads (a call reads its data before the next call starts), and its checks of the slots n reuses (settle()).
  const uint64_t needed = n - kCallsAhead;
  uint64_t lowest = UINT64_MAX;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    uint64_t& seen = seen_[static_cast<std::size_t>(q)];
    // Its newest exchange, if it has published the one before this rank's (no rank is kCallsAhead + 1 ahead, so
    // that slot holds n - 1 or an older exchange); else, where it runs a few calls behind (a rooted call's reader
    // behind its sender), the exchange halfway back, if published: either read gives room for many calls. Probing
    // n - 1 alone, a sender a few calls ahead found it unpublished at every call and moved its room by one exchange
    // a call, reading two of its reader's freshly written lines each time. Else the one needed, waited for.
    if (seen < n - 1) {
      if (head(slot(q, n - 1)).flag.load(std::memory_order_acquire) == n - 1) {
        seen = n - 1;
      } else if (const uint64_t half = n - kHalfBack;
                 seen < half && head(slot(q, half)).flag.load(std::memory_order_acquire) >= half) {
        seen = half;
      }
    }
    if (seen < needed) {
      const SlotHead& theirs = head(slot(q, needed));
      Reached reached{&theirs, needed, q, c.seq, past_[needed % kSlotDepth].seq};
      if (!flag_reached(&reached)) {
        c.view.mesh->wait_until(flag_reached, describe_reached, &reached, world_rank(c.view, q), c.deadline, c.what);
      }
      seen = needed;
    }
    lowest = std::min(lowest, seen);
  }
  room_ = lowest + kCallsAhead;
}

void SlotChannel::exchange(const Context& c, const CallDescriptor* mine, std::string_view invalid, const void* data,
                           std::size_t bytes, int reads) {
  const SlotPlan p = plan(c.what, mine, invalid, invalid.empty() ? bytes : 0, reads);
  if (invalid.empty()) return exchange(c, p, data);
  // An invalid call publishes its reason in place of its data.
  SlotPlan with_reason = p;
  with_reason.bytes = std::min(invalid.size(), kMaxReasonBytes);
  exchange(c, with_reason, invalid.data());
}

void SlotChannel::late_notice(const Context& c, uint64_t n, const SlotPlan& p, const std::string& late) {
  // This rank returned from that call as if it were right. It cannot run this call now: it takes exchange n as any
  // call does, tells the ranks that read its part of it, in place of its data, and checks this exchange later
  // (notices aside).
  if (n > room_) wait_for_room(c, n);
  past_[n % kSlotDepth] = Past{c.seq, c.what, p.checked};
  exchanges_ = n;
  note_failed_check(n);
  const std::string reason = "it learned only at this call that " + late;
  SlotPlan notice = p;
  notice.state = static_cast<uint8_t>(SlotState::kLateNotice);
  publish(n, notice, reason.data(), std::min(reason.size(), kSlotBytes));
  throw InvalidUsageError(fmt::format(
      "{}: call #{} of this group did not run: this rank learned only at this call that an earlier {}; the ranks "
      "that read this rank's part of call #{} fail it too (docs/errors.md)",
      c.what, c.seq, late, c.seq));
}

void SlotChannel::exchange(const Context& c, const SlotPlan& p, const void* data) {
  notes_ = 0;
  read_alike_ = false;
  const uint64_t n = exchanges_ + 1;
  // The pending checks of the calls this rank returned from early: all of them before a call that reads every slot
  // (it waits for the others anyway), at least those whose slots are the next to be reused, and, once kSettleBatch
  // are pending, those already complete.
  constexpr uint64_t kCheckLag = kSlotDepth - kCallsAhead;  // see slots.hpp
  const uint64_t must = p.reads == kReadAll ? exchanges_ : n > kCheckLag ? n - kCheckLag : 0;
  if (verified_ < must || (exchanges_ >= next_told_ && verified_ < exchanges_)) {
    std::string late = settle(c, must);
    if (!late.empty()) late_notice(c, n, p, late);  // throws
  }
  if (n > room_) wait_for_room(c, n);
  past_[n % kSlotDepth] = Past{c.seq, c.what, p.checked};
  exchanges_ = n;
  publish(n, p, data, p.bytes);
  if (p.reads == kReadNone) {
    // A sender (a rooted call's side that reads nothing): the next exchange's head, for writing, now. Its readers
    // read that line kSlotDepth exchanges ago and still hold it, so the next publish's first store would wait for
    // their copies to be invalidated (a line crossing cores, ~50 ns) and, with the call's stores behind it in the
    // store buffer, stall the sender. Asked for here, the line comes while this call returns (8 B on 2 ranks
    // bound, p50 / OpenMPI's in 3 alternations: broadcast 1.14-1.26 -> 1.14-1.20, scatter 1.23-1.33 -> 1.18-1.19).
    // Not where every rank reads every slot: ranks in step read the line beside the one just published, and an
    // all_reduce took 0.30 -> 0.41 us.
    prefetch_for_write(slot(rank_, n + 1));
    // The agreement lines the next call's settle() reads (written blocks ago: they stay the same until then).
    if (n == next_told_ && verified_ < n) prefetch_told(n);
    return;
  }
  receive(c, n, p);
  // kReadNone, or the root's slot alone: not every call seen, checked at a later exchange (settle).
}

[[gnu::always_inline]] inline void SlotChannel::receive(const Context& c, uint64_t n, const SlotPlan& p) {
  if (p.reads == kReadAll) {
    // Every other rank's slot in one pass: its flag (waited for), whether its call is this rank's, its note.
    SlotCall own;
    std::memcpy(&own, p.call, sizeof own);
    bool agree = p.state == static_cast<uint8_t>(SlotState::kCall);  // this rank's own call is valid, too
    uint8_t notes = note_;
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      const SlotHead& theirs = head(slot(q, n));
      if (theirs.flag.load(std::memory_order_acquire) != n) {
        Awaited awaited{&theirs, n, q, c.seq};
        c.view.mesh->wait_until(flag_set, describe, &awaited, world_rank(c.view, q), c.deadline, c.what);
      }
      agree &= theirs.state == SlotState::kCall && same_call(theirs.call, own);
      notes |= theirs.note;
    }
    verified_ = n;  // every call seen (the settle above checked every earlier one)
    room_ = n + kCallsAhead;  // every other rank published n
    if (agree) {
      // For the ranks that returned early (settle): every call through n alike. At the end of each block of
      // kSettleBatch exchanges only: a line written once in 2 x kSettleBatch exchanges stays the same from a
      // reader's prefetch to its read (slot_layout.hpp).
      if ((n & (kSettleBatch - 1)) == kSettleBatch - 1) {
        agreed_line(agreement(bases_[static_cast<std::size_t>(rank_)]), n).agreed.store(n, std::memory_order_release);
      }
      read_alike_ = true;
    } else {
      note_failed_check(n);
      if (p.checked) verdict(c, n, /*late_notices=*/true);
    }
    notes_ = notes;
    return;
  }
  Awaited awaited{&head(slot(p.reads, n)), n, p.reads, c.seq};
  if (!flag_set(&awaited)) {
    c.view.mesh->wait_until(flag_set, describe, &awaited, world_rank(c.view, p.reads), c.deadline, c.what);
  }
  const SlotHead& theirs = head(slot(p.reads, n));
  if (p.checked && (theirs.state != SlotState::kCall || !same_call(theirs.call, head(slot(rank_, n)).call))) {
    // Never its data: every rank's call, and the check's error (this call's; earlier pending ones are dropped).
    note_failed_check(n);
    wait_all(c, n, c.seq);
    verified_ = n;
    verdict(c, n, /*late_notices=*/true);
    throw Error(ErrorCode::kInternal, fmt::format("{}: rank {}'s call differs from this rank's, yet the call check "
                                                  "passed (call #{})", c.what, p.reads, c.seq));
  }
  read_alike_ = p.checked;  // its call compared with this rank's: alike
}

const char* SlotChannel::checked_data(const Context& c, int q, std::size_t expected) const {
  const char* s = slot(q, exchanges_);
  if (head(s).bytes != expected || head(s).state == SlotState::kInvalid || head(s).state == SlotState::kLateNotice) {
    throw InvalidUsageError(fmt::format("{}: rank {} published {} in its shared-memory slot where {} were expected; the "
                                        "ranks' calls disagree on the count or dtype - check that every rank passes "
                                        "matching arguments (DCOMM_CHECK_CALLS=1 names the rank)",
                                        c.what, q, format_bytes(head(s).bytes), format_bytes(expected)));
  }
  return slot_data(q, exchanges_, expected);
}

}  // namespace dcomm::coll
