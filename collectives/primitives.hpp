#pragma once
// Building blocks several algorithms share. Each works on a buffer of the call's dtype in place, numbers its
// messages from `step` upwards (the count each uses is given), and returns once its own sends have completed,
// so the caller may reuse every buffer.

#include <cstdint>
#include <vector>

#include "collectives/context.hpp"
#include "collectives/patterns.hpp"

namespace dcomm::coll {

/// Ring pass over blocks[P] of `buf`, pipelined in pieces of ctx.chunk_elems(); rank r's own block is
/// blocks[(r + shift) mod P]. Uses 1 step.
///   gather: rank r starts with its own block and ends with all of them (the all-gather half of ring).
///   reduce: every rank starts with all blocks of its own data and ends with its own block reduced over all
///           ranks (the reduce-scatter half); the other blocks are left partly reduced.
/// `first`, where not null, holds the data of the block this rank sends first (gather: its own block), to be sent
/// from there rather than from `buf`: the caller's input, whose lines a peer's single copy reads from memory, where
/// `buf`'s block was just written by this rank and is still in its cache (all_gather[ring] of 64 KiB on 2 ranks:
/// 7.7 us a call read from its output, 3.6 from its input, single copies forced).
void ring_pass(Context& c, char* buf, const std::vector<pattern::Block>& blocks, int shift, bool reduce, uint32_t step,
               const char* first = nullptr);

/// The ring all_reduce of c.work (c.work_count elements), starting from c.input when the engine left the input
/// where the caller put it (Algorithm::takes_input): the fallback of the algorithms that take their input. Uses 2
/// steps from `step`.
void ring_all_reduce_from_input(Context& c, uint32_t step);

/// Binomial-tree reduce of `count` elements of `buf` to `root`; other ranks' buffers are left partly reduced.
/// Uses 1 step.
void binomial_reduce(Context& c, char* buf, std::size_t count, int root, uint32_t step);
/// Binomial-tree broadcast of `count` elements of `buf` from `root`. Uses 1 step.
void binomial_broadcast(Context& c, char* buf, std::size_t count, int root, uint32_t step);

/// Recursive-halving reduce-scatter over blocks[P] (contiguous, in rank order): rank r ends with blocks[r]
/// reduced over all ranks. Non-powers of two fold the first 2*rem ranks in pairs first. With `unfold` false the
/// folded-out ranks get nothing back and the odd rank of each pair keeps both its and its partner's blocks
/// (what doubling_all_gather with fold_in false expects). Uses 2 + log2(p2) steps.
void halving_reduce_scatter(Context& c, char* buf, const std::vector<pattern::Block>& blocks, bool unfold,
                            uint32_t step);
/// Recursive-doubling all-gather over blocks[P]: rank r starts with blocks[r] and ends with all. With `fold_in`
/// false, the odd rank of each folded pair must already hold both blocks of its pair. Uses 2 + log2(p2) steps.
void doubling_all_gather(Context& c, char* buf, const std::vector<pattern::Block>& blocks, bool fold_in, uint32_t step);

/// Within this rank's node (ctx.view.hierarchy; `owners` holds a group rank on this node per block): the owner of
/// blocks[i] ends with it reduced over the node's ranks, in local-rank order of arrival; the others send their
/// part to it, in chunk-sized pieces. Uses 1 step.
void node_reduce_to_owners(Context& c, char* buf, const std::vector<pattern::Block>& blocks,
                           const std::vector<int>& owners, uint32_t step);
/// Within this rank's node: the owner of blocks[i] sends it to every other rank of the node. Uses 1 step.
void node_share_from_owners(Context& c, char* buf, const std::vector<pattern::Block>& blocks,
                            const std::vector<int>& owners, uint32_t step);

/// Posts the send (`send`) or the receive of `count` elements at `buf` to or from `peer` as chunk-sized pieces,
/// appending their requests to `reqs`. Both sides cut the same count alike, so the pieces match in order. Between
/// nodes this keeps every message within UCX's eager limit over TCP, where a large rendezvous message would
/// serialise a pair's two directions (transports/ucx/ucx_worker.cpp), and lets a receiver start on the first piece.
void post_pieces(Context& c, bool send, int peer, uint32_t step, char* buf, std::size_t count,
                 std::vector<transport::RequestPtr>& reqs);

/// Steps halving_reduce_scatter and doubling_all_gather use.
uint32_t fold_steps(int size);

}  // namespace dcomm::coll
