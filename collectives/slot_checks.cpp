// The pending checks of the shared-memory slots (slots.hpp): the calls a rank returned from before it saw every
// rank's, checked later - from the others' agreement lines where they cover them, else by comparing every rank's
// call in the slots - and the check's verdict over one exchange. The exchange itself: slots.cpp.

#include "collectives/slots.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <dcomm/error.hpp>

#include "collectives/slot_layout.hpp"
#include "common/log.hpp"

namespace dcomm::coll {

using namespace slot_layout;

void SlotChannel::wait_all(const Context& c, uint64_t n, uint64_t seq) const {
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    Awaited awaited{&head(slot(q, n)), n, q, seq};
    if (!flag_set(&awaited)) {
      c.view.mesh->wait_until(flag_set, describe, &awaited, world_rank(c.view, q), c.deadline, c.what);
    }
  }
}

void SlotChannel::verdict(const Context& c, uint64_t n, bool late_notices) const {
  int low = -1;  // the lowest rank compared: rank 0, unless it sent a late notice
  int bad = -1;
  for (int q = 0; q < size_; ++q) {
    const SlotHead& theirs = head(slot(q, n));
    const bool late = theirs.state == SlotState::kLateNotice;
    if (late && !late_notices) continue;
    if (theirs.state == SlotState::kInvalid || late) {
      const std::size_t cap = late ? kSlotBytes : kMaxReasonBytes;
      const std::size_t bytes = std::min<std::size_t>(theirs.bytes, cap);
      throw_invalid_call(c, q, std::string_view(slot_data(q, n, theirs.bytes), bytes));  // where it was published
    }
    if (theirs.state == SlotState::kNoCall) {
      throw InvalidUsageError(fmt::format("{}: rank {} has the call check off (call #{} of this group); "
                                          "DCOMM_CHECK_CALLS must be alike on every rank",
                                          c.what, q, c.seq));
    }
    if (low < 0) low = q;
    if (bad < 0 && !(theirs.call == head(slot(low, n)).call)) bad = q;
  }
  if (bad >= 0) throw_mismatched_calls(c, bad, expand(head(slot(bad, n)).call), low, expand(head(slot(low, n)).call));
}

bool SlotChannel::all_agree(uint64_t n) const {
  const SlotHead& own = head(slot(rank_, n));
  if (own.state != SlotState::kCall) return false;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;  // its call is its own
    const SlotHead& theirs = head(slot(q, n));
    if (theirs.state != SlotState::kCall || !same_call(theirs.call, own.call)) return false;
  }
  return true;
}

bool SlotChannel::all_published(uint64_t m) const {
  for (int q = 0; q < size_; ++q) {
    if (q != rank_ && head(slot(q, m)).flag.load(std::memory_order_acquire) != m) return false;
  }
  return true;
}

void SlotChannel::prefetch_told(uint64_t x) const {
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    Agreement& theirs = agreement(bases_[static_cast<std::size_t>(q)]);
    __builtin_prefetch(&agreed_line(theirs, x), 0, 3);
  }
}

void SlotChannel::note_failed_check(uint64_t n) {
  for (AgreedLine& line : agreement(bases_[static_cast<std::size_t>(rank_)]).by_block) {
    line.failed.store(n, std::memory_order_relaxed);
  }
}

SlotChannel::Told SlotChannel::told_by_others(uint64_t x) const {
  Told told;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    Agreement& theirs = agreement(bases_[static_cast<std::size_t>(q)]);
    // `failed` after `agreed` (its writer stores them the other way round): a failure that rank met before the
    // `agreed` read here is seen here, and one met at a pending exchange is at least that exchange.
    const AgreedLine& line = agreed_line(theirs, x);
    const uint64_t agreed = line.agreed.load(std::memory_order_acquire);
    if (line.failed.load(std::memory_order_relaxed) > verified_) {
      told.failure = true;
    } else {
      told.through = std::max(told.through, agreed);
    }
  }
  return told;
}

std::string SlotChannel::settle(const Context& c, uint64_t must) {
  // What the others checked already (their agreement lines): one line a rank, not one per exchange - read once
  // every kSettleBatch exchanges, at multiples of it (the line of the block before last: slot_layout.hpp).
  if (exchanges_ >= next_told_) {
    next_told_ = (exchanges_ / kSettleBatch + 1) * kSettleBatch;
    const Told told = told_by_others(exchanges_);
    // Beyond `must`, the pending exchanges wait for a later reading while another rank's line moves on; a failure
    // that rank met, or no line moving past verified_, has this rank compare the calls itself.
    rely_on_told_ = told.through > last_told_ && !told.failure;
    last_told_ = told.through;
    if (rely_on_told_ && told.through > verified_) verified_ = std::min(told.through, exchanges_);
  }
  while (verified_ < exchanges_) {
    const uint64_t m = verified_ + 1;
    const Past& past = past_[m % kSlotDepth];
    if (m > must && rely_on_told_) break;
    if (!all_published(m)) {
      if (m > must) break;  // beyond `must`, only what is already there
      wait_all(c, m, past.seq);
    }
    verified_ = m;
    if (!past.checked || all_agree(m)) continue;
    // The check's error is named after the call it checks: its number and its algorithm.
    Context then(c.args, c.view, c.deadline, past.seq, past.what, c.chunk_bytes);
    try {
      verdict(then, m, /*late_notices=*/false);
    } catch (const InvalidUsageError& e) {
      // Reported once: the calls this rank returned from after it are not checked again (a rank that read their
      // data compared their calls itself).
      verified_ = exchanges_;
      return fmt::format("call #{} of this group failed the call check after this rank had returned from it (its "
                         "part only sent, or read the root's alone): {}",
                         past.seq, e.what());
    }
  }
  return {};
}

void SlotChannel::settle_quietly(const GroupView& view, const Deadline& deadline) noexcept {
  if (verified_ >= exchanges_) return;
  try {
    if (view.mesh && view.mesh->poisoned()) return;  // the group failed: nothing to check against
    Args none;
    none.coll = Collective::kBarrier;
    const Past& last = past_[exchanges_ % kSlotDepth];
    Context c(none, view, deadline, last.seq, last.what, 0);
    std::string failed = settle(c, exchanges_);
    if (!failed.empty()) DCOMM_WARN("the process group's last calls, checked as the group is destroyed: {}", failed);
  } catch (const std::exception& e) {
    DCOMM_WARN("the process group's last calls, checked as the group is destroyed: {}", e.what());
  } catch (...) {
  }
}

}  // namespace dcomm::coll
