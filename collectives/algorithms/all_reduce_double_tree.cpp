// all_reduce[double_tree]: NCCL's double binary tree, pipelined in chunk-sized pieces.
//   Two binary trees span the ranks; a leaf of one is an inner node of the other (tree 1 mirrors tree 0 for even
//   P, shifts it by one for odd P), so every rank sends and receives about n bytes in total. Half of the vector
//   goes through each tree.
//   1. Reduce: for each piece, a rank waits for its children's piece, combines (own data, child 0, child 1 in
//      that order) and passes the piece to its parent at once; pieces stream up both trees together.
//   2. Broadcast: each tree's root holds its half's total and streams it down piece by piece.
//   Every rank ends with the roots' bits.
// Cost with k = ⌈n / (2·chunk)⌉ pieces per tree: 2(⌈log₂P⌉ + k - 1)(α + n/k·β) + nγ → 2⌈log₂P⌉α + 2nβ for
// large n (log latency, near-optimal bandwidth).

#include <algorithm>
#include <cmath>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

using pattern::Block;

void run_all_reduce_double_tree(Context& c) {
  const int p = c.size();
  if (p == 1) return;
  const std::size_t es = c.esize();
  std::vector<Block> halves = pattern::even_blocks(c.work_count, 2);
  pattern::BinaryNode node[2] = {pattern::double_tree(c.rank(), p, 0), pattern::double_tree(c.rank(), p, 1)};
  std::vector<Block> parts[2] = {pattern::pieces(halves[0], c.chunk_elems()),
                                 pattern::pieces(halves[1], c.chunk_elems())};
  const std::size_t rounds = std::max(parts[0].size(), parts[1].size());

  // Up: steps 0 and 1 (one per tree). Children's pieces land in scratch laid out like the vector, one copy
  // per child slot.
  Scratch from_child[2] = {c.scratch(c.work_count), c.scratch(c.work_count)};
  std::vector<transport::RequestPtr> recvs[2][2];
  for (int t = 0; t < 2; ++t) {
    int kids[2] = {node[t].child0, node[t].child1};
    for (int k = 0; k < 2; ++k) {
      if (kids[k] < 0) continue;
      for (const Block& pc : parts[t]) {
        if (pc.count > 0) {
          recvs[t][k].push_back(
              c.irecv(kids[k], static_cast<uint32_t>(t), c.at(from_child[k].data(), pc.offset), pc.count * es));
        }
      }
    }
  }
  std::vector<transport::RequestPtr> sends;
  for (std::size_t i = 0; i < rounds; ++i) {
    for (int t = 0; t < 2; ++t) {
      if (i >= parts[t].size() || parts[t][i].count == 0) continue;
      const Block& pc = parts[t][i];
      for (int k = 0; k < 2; ++k) {
        if (recvs[t][k].empty()) continue;
        c.wait(recvs[t][k][i]);
        c.reduce(c.at(c.work, pc.offset), c.at(from_child[k].data(), pc.offset), pc.count);
      }
      if (node[t].parent >= 0) {
        sends.push_back(c.isend(node[t].parent, static_cast<uint32_t>(t), c.at(c.work, pc.offset), pc.count * es));
      }
    }
  }
  c.wait_all(sends);

  // Down: steps 2 and 3. Pieces arrive from the parent straight into the vector and go on to the children.
  std::vector<transport::RequestPtr> down[2];
  for (int t = 0; t < 2; ++t) {
    if (node[t].parent < 0) continue;
    for (const Block& pc : parts[t]) {
      if (pc.count > 0) {
        down[t].push_back(
            c.irecv(node[t].parent, 2u + static_cast<uint32_t>(t), c.at(c.work, pc.offset), pc.count * es));
      }
    }
  }
  for (std::size_t i = 0; i < rounds; ++i) {
    for (int t = 0; t < 2; ++t) {
      if (i >= parts[t].size() || parts[t][i].count == 0) continue;
      const Block& pc = parts[t][i];
      if (!down[t].empty()) c.wait(down[t][i]);
      for (int kid : {node[t].child0, node[t].child1}) {
        if (kid >= 0)
          sends.push_back(c.isend(kid, 2u + static_cast<uint32_t>(t), c.at(c.work, pc.offset), pc.count * es));
      }
    }
  }
  c.wait_all(sends);
}

double cost_all_reduce_double_tree(const CostParams& p, double n, int size) {
  double k = std::max(1.0, std::ceil(n / (2.0 * p.chunk_bytes)));
  return 2.0 * (log2_rounds(size) + k - 1.0) * (p.alpha + n / k * p.beta) + n * p.gamma;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllReduce, "double_tree", "two complementary binary trees, pipelined (NCCL tree)",
                         supports_any, run_all_reduce_double_tree, cost_all_reduce_double_tree}};
}  // namespace

}  // namespace dcomm::coll
