#include <algorithm>

#include "collectives/primitives.hpp"

namespace dcomm::coll {

using pattern::Block;

void ring_pass(Context& c, char* buf, const std::vector<Block>& blocks, int shift, bool reduce, uint32_t step,
               const char* first) {
  const int p = c.size();
  const int r = c.rank();
  if (p == 1) return;
  const int next = pattern::ring_next(r, p);
  const int prev = pattern::ring_prev(r, p);
  const int lag = reduce ? 1 : 0;
  // The block this rank sends in round s; the one it receives in round s is what it sends in round s + 1.
  auto block = [&](int s) { return blocks[static_cast<std::size_t>(pattern::mod(r - s - lag + shift, p))]; };
  const std::size_t piece = c.chunk_elems();
  std::size_t largest = 0;
  for (const Block& b : blocks) largest = std::max(largest, b.count);
  // Reduce mode receives into scratch, alternating two buffers so round s + 1 may land while s is reduced.
  Scratch tmp[2];
  if (reduce) {
    tmp[0] = c.scratch(largest);
    tmp[1] = c.scratch(largest);
  }

  std::vector<transport::RequestPtr> sends;
  const Block own = block(0);
  for (const Block& pc : pattern::pieces(own, piece)) {
    const char* from = first != nullptr ? c.at(first, pc.offset - own.offset) : c.at(buf, pc.offset);
    if (pc.count > 0) sends.push_back(c.isend(next, step, from, pc.count * c.esize()));
  }
  for (int s = 0; s + 1 < p; ++s) {
    const Block in = block(s + 1);
    const std::vector<Block> parts = pattern::pieces(in, piece);
    auto landing = [&](const Block& pc) {
      return reduce ? c.at(tmp[s % 2].data(), pc.offset - in.offset) : c.at(buf, pc.offset);
    };
    std::vector<transport::RequestPtr> recvs;
    for (const Block& pc : parts) {
      recvs.push_back(pc.count > 0 ? c.irecv(prev, step, landing(pc), pc.count * c.esize()) : nullptr);
    }
    // Forward each piece as soon as it is in (and reduced): this is what pipelines the ring.
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const Block& pc = parts[i];
      if (pc.count == 0) continue;
      c.wait(recvs[i]);
      if (reduce) c.reduce(c.at(buf, pc.offset), landing(pc), pc.count);
      if (s + 2 < p) sends.push_back(c.isend(next, step, c.at(buf, pc.offset), pc.count * c.esize()));
    }
  }
  c.wait_all(sends);
}

void ring_all_reduce_from_input(Context& c, uint32_t step) {
  if (c.input != c.work) c.copy(c.work, c.input, c.work_count);
  std::vector<Block> blocks = pattern::even_blocks(c.work_count, c.size());
  ring_pass(c, c.work, blocks, 0, /*reduce=*/true, step);
  ring_pass(c, c.work, blocks, 0, /*reduce=*/false, step + 1);
}

}  // namespace dcomm::coll
