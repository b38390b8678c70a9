#pragma once
// Pure rank arithmetic shared by the algorithms: who talks to whom, and which elements move, in each step.
// No I/O here, so every schedule is unit-tested on its own (tests/collectives/test_patterns.cpp).

#include <cstddef>
#include <vector>

namespace dcomm::coll::pattern {

/// A run of elements [offset, offset + count).
struct Block {
  std::size_t offset = 0;
  std::size_t count = 0;
  std::size_t end() const { return offset + count; }
};

/// `count` split into `parts` nearly equal blocks: the first count % parts blocks get one element more.
std::vector<Block> even_blocks(std::size_t count, int parts);
/// `count` split into `parts` consecutive blocks in proportion to their weights: part `heavy` weighs `heavy_weight`,
/// every other part `weight` (they share the rest as even_blocks does). For work that costs some ranks more per
/// element than others (reduce[cma]: the root writes nothing back).
std::vector<Block> weighted_blocks(std::size_t count, int parts, int heavy, std::size_t heavy_weight,
                                   std::size_t weight);
/// Blocks from per-part counts and displacements (empty displs: packed in order).
std::vector<Block> blocks_from(const std::vector<std::size_t>& counts, const std::vector<std::size_t>& displs);
/// `b` cut into pieces of at most max_count elements (at least one piece, possibly empty), for pipelining.
std::vector<Block> pieces(Block b, std::size_t max_count);
/// The union of blocks [first, last) of a contiguous layout.
Block span(const std::vector<Block>& blocks, int first, int last);

inline int ring_next(int rank, int size) { return (rank + 1) % size; }
inline int ring_prev(int rank, int size) { return (rank + size - 1) % size; }
inline int mod(int a, int n) { return ((a % n) + n) % n; }

int ceil_log2(int n);   ///< 0 for n <= 1
int floor_pow2(int n);  ///< the largest power of two <= n (n >= 1)

/// A rank's place in the binomial tree rooted at `root`. Children are listed smallest subtree first (the
/// order a reduce receives in); a broadcast sends to them in reverse (largest subtree first).
struct TreeNode {
  int parent = -1;
  std::vector<int> children;
};
TreeNode binomial_tree(int rank, int size, int root);
/// Ranks in the subtree of `rank` (itself included) in the binomial tree rooted at `root`, as a count of
/// consecutive relative ranks starting at rank's relative rank.
int binomial_subtree_size(int rank, int size, int root);

/// Folding a non-power-of-two group onto p2 = floor_pow2(size) ranks: the first 2 * rem ranks (rem = size - p2)
/// pair up; the even one of each pair hands its data to the odd one and sits out (vrank -1).
struct Fold {
  int p2 = 1;
  int rem = 0;
  int vrank = -1;    ///< this rank's rank among the p2, or -1 when folded out
  int partner = -1;  ///< the pair's other rank when rank < 2 * rem, else -1
};
Fold fold(int rank, int size);
/// The real rank of virtual rank v.
int fold_real_rank(int vrank, int size);
/// The real ranks [first, last) that virtual rank v stands for after folding (two for a folded pair).
void fold_real_span(int vrank, int size, int* first, int* last);

/// One round of recursive halving among p2 virtual ranks over block indices [0, p2): exchange with `partner`,
/// send the blocks in [send_lo, send_hi) and keep (reduce) [keep_lo, keep_hi).
struct HalvingStep {
  int partner = -1;
  int send_lo = 0, send_hi = 0;
  int keep_lo = 0, keep_hi = 0;
};
/// Rounds in order (distance p2/2 first); the last keep range is this vrank's own block [vrank, vrank + 1).
/// Recursive doubling (all-gather) runs them backwards, sending the keep range and receiving the send range.
std::vector<HalvingStep> halving_schedule(int vrank, int p2);

/// Recursive-doubling partners among p2 virtual ranks: vrank ^ 1, vrank ^ 2, ...
std::vector<int> doubling_partners(int vrank, int p2);

/// A node of a binary tree: parent and up to two children (-1 when absent).
struct BinaryNode {
  int parent = -1;
  int child0 = -1;
  int child1 = -1;
};
/// The two trees of the double binary tree (NCCL's): tree 0 is an in-order binary tree rooted at 0; tree 1 is
/// its mirror (even size) or its shift by one (odd size), so a leaf of one tree is an inner node of the other.
BinaryNode double_tree(int rank, int size, int which);

/// Round k of Bruck's all-gather: send the first `blocks` blocks held to `to`, receive as many from `from`
/// into place `blocks_held` (= 2^k) onwards. Rank r's buffer ends holding rank (r + i) mod P's block at place i.
struct BruckStep {
  int to = -1;
  int from = -1;
  int blocks = 0;
  int blocks_held = 0;
};
std::vector<BruckStep> bruck_schedule(int rank, int size);

/// Dissemination (barrier, call check): in round k rank r sends to r + 2^k and receives from r - 2^k.
inline int dissemination_to(int rank, int size, int round) { return (rank + (1 << round)) % size; }
inline int dissemination_from(int rank, int size, int round) { return mod(rank - (1 << round), size); }

}  // namespace dcomm::coll::pattern
