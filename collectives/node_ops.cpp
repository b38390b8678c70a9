// The node-local halves of the hierarchical algorithms: a direct reduce-scatter to each block's owner and the
// direct all-gather back from it; and the chunk-sized pieces their messages between nodes travel in. Direct rather than
// a ring because a block's owner is any rank of the node (a small node serves several rails), and within a node every
// pair is one shared-memory hop. Both sides walk the blocks, and the pieces of each, in the same order, so matching per
// (source, tag) pairs them.

#include "collectives/primitives.hpp"
#include "collectives/topology.hpp"

namespace dcomm::coll {

using pattern::Block;

namespace {

const std::vector<int>& my_node(const Context& c) {
  const Hierarchy& h = *c.view.hierarchy;
  return h.topo.nodes[static_cast<std::size_t>(h.node)];
}

}  // namespace

void post_pieces(Context& c, bool send, int peer, uint32_t step, char* buf, std::size_t count,
                 std::vector<transport::RequestPtr>& reqs) {
  for (const Block& pc : pattern::pieces(Block{0, count}, c.chunk_elems())) {
    if (pc.count == 0) continue;
    char* at = c.at(buf, pc.offset);
    reqs.push_back(send ? c.isend(peer, step, at, pc.count * c.esize())
                        : c.irecv(peer, step, at, pc.count * c.esize()));
  }
}

void node_reduce_to_owners(Context& c, char* buf, const std::vector<Block>& blocks, const std::vector<int>& owners,
                           uint32_t step) {
  const std::vector<int>& node = my_node(c);
  if (node.size() == 1) return;
  const std::size_t piece = c.chunk_elems();
  std::vector<transport::RequestPtr> sends;
  std::size_t owned = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (owners[i] == c.rank()) {
      owned += blocks[i].count;
      continue;
    }
    for (const Block& pc : pattern::pieces(blocks[i], piece)) {
      if (pc.count > 0) sends.push_back(c.isend(owners[i], step, c.at(buf, pc.offset), pc.count * c.esize()));
    }
  }
  // Every part this rank reduces lands in its own place of one scratch buffer, all posted up front.
  Scratch tmp = c.scratch(owned * (node.size() - 1));
  struct Part {
    transport::RequestPtr req;
    char* at;
    std::size_t dst_offset;
    std::size_t count;
  };
  std::vector<Part> parts;
  std::size_t landed = 0;
  for (int q : node) {
    if (q == c.rank()) continue;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      if (owners[i] != c.rank()) continue;
      for (const Block& pc : pattern::pieces(blocks[i], piece)) {
        if (pc.count == 0) continue;
        char* at = c.at(tmp.data(), landed);
        parts.push_back({c.irecv(q, step, at, pc.count * c.esize()), at, pc.offset, pc.count});
        landed += pc.count;
      }
    }
  }
  for (Part& p : parts) {
    c.wait(p.req);
    c.reduce(c.at(buf, p.dst_offset), p.at, p.count);
  }
  c.wait_all(sends);
}

void node_share_from_owners(Context& c, char* buf, const std::vector<Block>& blocks, const std::vector<int>& owners,
                            uint32_t step) {
  const std::vector<int>& node = my_node(c);
  if (node.size() == 1) return;
  const std::size_t piece = c.chunk_elems();
  std::vector<transport::RequestPtr> reqs;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    for (const Block& pc : pattern::pieces(blocks[i], piece)) {
      if (pc.count == 0) continue;
      const std::size_t bytes = pc.count * c.esize();
      if (owners[i] != c.rank()) {
        reqs.push_back(c.irecv(owners[i], step, c.at(buf, pc.offset), bytes));
        continue;
      }
      for (int q : node) {
        if (q != c.rank()) reqs.push_back(c.isend(q, step, c.at(buf, pc.offset), bytes));
      }
    }
  }
  c.wait_all(reqs);
}

}  // namespace dcomm::coll
