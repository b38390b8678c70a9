#pragma once
// Reduction through shared-memory windows, in rounds: all_reduce[shm_direct] (every rank receives the result)
// and reduce[shm_direct] (only the root does).
//   Setup (the first call, and any call whose round is larger than the windows so far; every rank sees the same
//   sizes): each rank creates a shared-memory segment with two halves of the capacity (at most kShmRoundBytes
//   each), the ranks agree that all succeeded, map each other's segments and unlink the names. The windows stay
//   mapped while the group lives.
//   A call runs in rounds of at most kShmRoundBytes, each in the half (round parity) not used by the round before:
//   1. Each rank copies the parts of its input that the others reduce (slice q of P, for every q != r) into its
//      own window, with non-temporal stores (the others read those lines next), or plain ones where the group's
//      probe found them faster (collectives/window_probe.hpp; rounds are then kShmCachedRoundBytes). Barrier (dissemination over the
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

#include <algorithm>
#include <cstddef>

#include "collectives/context.hpp"
#include "collectives/registry.hpp"

namespace dcomm::coll {

/// A round's share of the windows: small enough that both halves of every rank's window stay in the last-level
/// cache (32 MiB on the machines measured) between being written and being read by the others.
inline constexpr std::size_t kShmRoundBytes = std::size_t{4} << 20;
/// The round where plain stores fill the windows (collectives/window_probe.hpp): the others read the lines from
/// the writer's caches, so a round should fit them. Measured on 2 ranks (session 7, Zen 4, alternating runs), with
/// rounds of 4 MiB / 1 MiB: 4 MiB calls 593-1130 / 349-509 us, 16 MiB 2919-3757 / 2383-2959, 64 MiB 11.4-11.5 /
/// 9.8-11.6 ms; 1 MiB calls 67-144 / 72-82 us; rounds of 512 KiB lost at 1 MiB (87-98 us).
inline constexpr std::size_t kShmCachedRoundBytes = std::size_t{1} << 20;
/// With plain stores, how much of a call's window reads wait on lines crossing cores one by one before the
/// hardware streams them (the cost model's fit, session 7: see cost_shm_rounds).
inline constexpr std::size_t kShmStreamingReadBytes = std::size_t{256} << 10;
/// The price of a call's `reads` bytes from windows that plain stores filled: up to kShmStreamingReadBytes at the
/// probe's small price, past it at its 1 MiB price (CostParams::window_plain_beta). Priced free past it (with the
/// copies around them, session 7's fit on a VM whose lines crossed fast), the reads left all_reduce[shm_direct] at
/// a fifth of its time where lines cross slowly: on 2 ranks bound with the 1 MiB pattern at 181 us, 16 MiB priced
/// 0.63 ms measured 2.7-3.1, and the model took reduce[shm_direct] (3.1-3.2 ms) over cma (2.0-2.3) from 1 to 16 MiB
/// (session 28, DCOMM_TUNE=off); all_gather[shm_rounds] was taken at 1 and 16 MiB where cma measured 0.72-0.78x its
/// time (auto / fastest row 1.38, 1.10, 1.28, 1.00 from 1 to 64 MiB; priced so, 0.95, 1.02, 1.04, 1.23).
/// reduce_scatter[shm_rounds] too since session 30, when reduce_scatter[cma] (1.4-1.8x faster from 256 KiB to 64 MiB
/// on 2 ranks) came, and the engine's copy of the input was priced for the reduce_scatter rows that take it (ring's
/// among them): before, priced so, it lost to ring, which measured 1.6x its time (64 MiB 29.3 ms against 18.5).
inline double cached_window_reads(const CostParams& p, double reads) {
  const double streaming = static_cast<double>(kShmStreamingReadBytes);
  return std::min(reads, streaming) * p.small_window_read() + std::max(reads - streaming, 0.0) * p.streaming_window_read();
}

/// Collective over the group (steps below 1000). Reduces every rank's Context::input into the work buffer of
/// `root`, or of every rank when `root` < 0, and carries the call check (Context::call). Returns false on every
/// rank, having run the check but moved nothing, when a rank could not create its window (a small /dev/shm;
/// logged, and false from then on): the caller runs another algorithm instead, from step 1000.
bool shm_rounds_reduce(Context& c, int root);

/// Regular all_gather and all_to_all, and broadcast, through the same windows, in rounds (steps below 1000): each
/// rank copies round k's part of what it sends (all_gather: its block; all_to_all: its block for each other rank,
/// into that rank's lane; broadcast: the root its buffer, the others nothing) into its window half (k's parity),
/// and its own block into its place, barrier, then copies round k's part of every other rank's block for it out of
/// their windows (broadcast: the root's), interleaved (with plain stores) with round k + 1's copies in. One barrier a round: a rank writes a half again two rounds later, after every rank has passed the
/// barrier of the round in between, so finished reading it. A round's parts together are kShmCachedRoundBytes
/// (plain stores) or kShmRoundBytes. Expects the call checked (Context::call null). Returns false on every rank,
/// having moved nothing, when a rank could not create its window (logged, and false from then on): the caller
/// runs another algorithm instead, from step 1000.
bool shm_rounds_blocks(Context& c);

/// Regular reduce_scatter through the same windows, in rounds (steps below 1000): each rank copies round k's part of
/// every other rank's block of its input (Context::input) into that rank's lane of its window half (k's parity),
/// barrier, then reduces round k's part of its own block, its own input's and the others' parts in rank order, into
/// block r of the work buffer (the engine copies it to the output). One barrier a round, as shm_rounds_blocks: a
/// rank writes a half again two rounds later, after every rank has passed the barrier of the round in between (so
/// finished reducing from it). Expects the call checked (Context::call null). Returns false on every rank, having
/// moved nothing, when a rank could not create its window (logged, and false from then on).
bool shm_rounds_reduce_scatter(Context& c);

}  // namespace dcomm::coll
