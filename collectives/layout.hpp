#pragma once
// Where each rank's block sits in the buffers of the collectives that move per-rank blocks (scatter, gather,
// all_gather, reduce_scatter, all_to_all), for the regular and the v-variants alike.

#include <vector>

#include "collectives/engine.hpp"
#include "collectives/patterns.hpp"

namespace dcomm::coll {

/// P blocks of n elements each, back to back.
std::vector<pattern::Block> uniform_blocks(std::size_t n, int size);
/// The root's send buffer of a scatter / scatterv: rank i's block.
std::vector<pattern::Block> scatter_blocks(const Args& a, int size);
/// The root's receive buffer of a gather / gatherv: rank i's block.
std::vector<pattern::Block> gather_blocks(const Args& a, int size);
/// all_to_all / all_to_all_v: the blocks of `send` going to rank i, and of `recv` coming from rank i.
std::vector<pattern::Block> a2a_send_blocks(const Args& a, int size);
std::vector<pattern::Block> a2a_recv_blocks(const Args& a, int size);

/// A regular all_gather's output: rank q's block at block(q).
struct GatheredBlocks {
  explicit GatheredBlocks(const Args& a) : out(static_cast<char*>(a.recv.data)), bytes(a.send.bytes()) {}
  char* operator()(int q) const { return out + static_cast<std::size_t>(q) * bytes; }
  char* out;
  std::size_t bytes;
};

/// A regular all_gather: where this rank's block is read from. In place (send inside recv: at its start or at this
/// rank's block) the block is first moved to its place in recv, since the others' blocks land where it was, and
/// read from there; otherwise send, untouched.
const char* own_block_first(const Args& a, int rank);

/// Whether [a, a + a_bytes) and [b, b + b_bytes) share no byte: where an algorithm's root may copy its own block
/// into its receive buffer while the others still read its send buffer (scatter), or reduce into its output while
/// they read its input (reduce_scatter). Empty ranges share none.
inline bool disjoint(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto* x = static_cast<const char*>(a);
  const auto* y = static_cast<const char*>(b);
  return a_bytes == 0 || b_bytes == 0 || x + a_bytes <= y || y + b_bytes <= x;
}

}  // namespace dcomm::coll
