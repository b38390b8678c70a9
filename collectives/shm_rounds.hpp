#pragma once
// Reduction through shared-memory windows, in rounds: all_reduce[shm_direct] (every rank receives the result)
// and reduce[shm_direct] (only the root does).
//   Setup (the first call, and any call whose round is larger than the windows so far; every rank sees the same
//   sizes): each rank creates a shared-memory segment with two halves of the capacity (at most kShmRoundBytes
//   each), the ranks agree that all succeeded, map each other's segments and unlink the names. The windows stay
//   mapped while the group lives.
//   A call runs in rounds of at most kShmRoundBytes, each in the half (round parity) not used by the round before:
//   1. Each rank copies the parts of its input that the others reduce (slice q of P, for every q != r) into its
//      own window, with non-temporal stores (the others read those lines next). Barrier (dissemination over the
//      mesh; in the first round, with the call check on, the check's own rounds, so the call pays no separate
//      check).
//   2. Rank r reduces slice r in cache-sized pieces, in rank order, from its own input and the others' windows,
//      into slice r of its own window, and (where it receives the result) copies each piece on into its output.
//      Barrier.
//   3. Each rank that receives the result copies slice q from rank q's window into its output, for every q != r.
//   Alternating halves is what makes a third barrier unnecessary: a rank writes a half again only two rounds
//   later, after every rank has passed the first barrier of the round in between (so finished reading it).
//   Each slice is reduced by one rank only, so every rank holds identical bits. The input is read where the
//   caller left it (the algorithms are takes_input), and no rank ever reads another's user buffer.
// Rounds keep the windows small enough to stay in the last-level cache while the others read them: past the
// first, a rank's memory traffic is its input read once and its output written once, and /dev/shm holds
// 2·kShmRoundBytes per rank whatever the call's size. From kShmStreamBytes the output is written with
// non-temporal stores, which saves reading each output line before writing it.

#include <cstddef>

#include "collectives/context.hpp"

namespace dcomm::coll {

/// A round's share of the windows: small enough that both halves of every rank's window stay in the last-level
/// cache (32 MiB on the machines measured) between being written and being read by the others.
inline constexpr std::size_t kShmRoundBytes = std::size_t{4} << 20;

/// Collective over the group (steps below 1000). Reduces every rank's Context::input into the work buffer of
/// `root`, or of every rank when `root` < 0, and carries the call check (Context::call). Returns false on every
/// rank, having run the check but moved nothing, when a rank could not create its window (a small /dev/shm;
/// logged, and false from then on): the caller runs another algorithm instead, from step 1000.
bool shm_rounds_reduce(Context& c, int root);

}  // namespace dcomm::coll
