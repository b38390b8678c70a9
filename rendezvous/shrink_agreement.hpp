#pragma once
// The survivors' agreement on who failed, for ProcessGroup::shrink (runtime/shrink.cpp), through the store only.
//
// Round r of one shrink (keys under the caller's prefix, one per shrink epoch):
//   r<r>/joined/<rank>  each survivor announces itself (a heartbeat that says "I am alive and shrinking")
//   r<r>/decision       the members, written once with compare_set (first writer wins): any joined rank proposes
//                       the ranks joined so far as soon as every candidate has joined or is certainly dead, or
//                       when the join window closes. Whoever reads it afterwards reads the same set, so the
//                       failed set is identical on every survivor even when failures race with the call; a rank
//                       that joined too late finds itself outside it and is told (ExcludedError).
//   r<r>/ready/<rank>   each member built the new mesh (phase 1 of a two-phase commit)
//   r<r>/outcome        "commit" once every member is ready, "abort" when a member died (or the deadline passed)
//                       before; again compare_set, so every member takes the same branch. After an abort the
//                       members of round r run round r+1 (candidates: round r's members): a failure during the
//                       shrink itself costs one more round, never a split.
#include <dcomm/store.hpp>
#include <functional>
#include <string>
#include <vector>

#include "common/deadline.hpp"

namespace dcomm::rdzv {

struct ShrinkAgreement {
  std::function<void()> on_joined;             ///< called once this rank has announced itself (a test's fault point)
  Store* store = nullptr;                      ///< prefixed for this shrink epoch
  int self = -1;                               ///< this rank in the group being shrunk
  int size = 0;                                ///< the group's size
  std::function<bool(int)> known_dead;         ///< certain knowledge that rank r died (never a guess); may be null
  Deadline join_deadline = Deadline::never();  ///< the join window: who has not joined by then is left out
  Deadline deadline = Deadline::never();       ///< bounds the whole shrink
  std::string what;                            ///< "shrink rank 2/5", starts every error
};

/// Round `round`'s members (ranks of the group, ascending), agreed by every caller. `candidates`: who may be a
/// member (round 0: every rank). Throws ExcludedError when this rank is not a member, TimeoutError at the deadline.
std::vector<int> agree_members(const ShrinkAgreement& a, int round, const std::vector<int>& candidates);

/// Phase 2: `ready` says whether this member built its part (false: it failed and votes abort). Returns true when
/// the round committed, false when it aborted; the same answer on every member.
bool agree_outcome(const ShrinkAgreement& a, int round, const std::vector<int>& members, bool ready);

/// "0,2,3" and back.
std::string encode_ranks(const std::vector<int>& ranks);
std::vector<int> decode_ranks(const std::string& text);

}  // namespace dcomm::rdzv
