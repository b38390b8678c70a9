#include <algorithm>

#include "collectives/primitives.hpp"

namespace dcomm::coll {

using pattern::Block;

namespace {

// The elements virtual blocks [vlo, vhi) cover: the real blocks of the ranks they stand for.
Block virtual_span(const std::vector<Block>& blocks, int size, int vlo, int vhi) {
  int first = 0, last = 0, unused = 0;
  pattern::fold_real_span(vlo, size, &first, &unused);
  pattern::fold_real_span(vhi - 1, size, &unused, &last);
  return pattern::span(blocks, first, last);
}

}  // namespace

uint32_t fold_steps(int size) { return 2 + static_cast<uint32_t>(pattern::ceil_log2(pattern::floor_pow2(size))); }

void halving_reduce_scatter(Context& c, char* buf, const std::vector<Block>& blocks, bool unfold, uint32_t step) {
  const int p = c.size();
  const int r = c.rank();
  if (p == 1) return;
  const pattern::Fold f = pattern::fold(r, p);
  const Block all = pattern::span(blocks, 0, p);
  const std::size_t es = c.esize();
  Scratch tmp = c.scratch(all.count);
  char* t = tmp.data() - all.offset * es;  // indexed like buf
  if (f.partner >= 0 && f.vrank < 0) {
    c.send(f.partner, step, c.at(buf, all.offset), all.count * es);
  } else if (f.partner >= 0) {
    c.recv(f.partner, step, c.at(t, all.offset), all.count * es);
    c.reduce(c.at(buf, all.offset), c.at(t, all.offset), all.count);
  }
  if (f.vrank >= 0) {
    uint32_t round = 1;
    for (const pattern::HalvingStep& s : pattern::halving_schedule(f.vrank, f.p2)) {
      Block out = virtual_span(blocks, p, s.send_lo, s.send_hi);
      Block keep = virtual_span(blocks, p, s.keep_lo, s.keep_hi);
      int peer = pattern::fold_real_rank(s.partner, p);
      c.sendrecv(peer, c.at(buf, out.offset), out.count * es, peer, c.at(t, keep.offset), keep.count * es,
                 step + round++);
      c.reduce(c.at(buf, keep.offset), c.at(t, keep.offset), keep.count);
    }
  }
  if (!unfold || f.partner < 0) return;
  const Block& theirs = blocks[static_cast<std::size_t>(f.partner)];
  const Block& mine = blocks[static_cast<std::size_t>(r)];
  uint32_t last = fold_steps(p) - 1;
  if (f.vrank >= 0) {
    c.send(f.partner, step + last, c.at(buf, theirs.offset), theirs.count * es);
  } else {
    c.recv(f.partner, step + last, c.at(buf, mine.offset), mine.count * es);
  }
}

void doubling_all_gather(Context& c, char* buf, const std::vector<Block>& blocks, bool fold_in, uint32_t step) {
  const int p = c.size();
  const int r = c.rank();
  if (p == 1) return;
  const pattern::Fold f = pattern::fold(r, p);
  const std::size_t es = c.esize();
  if (fold_in && f.partner >= 0) {
    if (f.vrank < 0) {
      const Block& mine = blocks[static_cast<std::size_t>(r)];
      c.send(f.partner, step, c.at(buf, mine.offset), mine.count * es);
    } else {
      const Block& theirs = blocks[static_cast<std::size_t>(f.partner)];
      c.recv(f.partner, step, c.at(buf, theirs.offset), theirs.count * es);
    }
  }
  if (f.vrank >= 0) {
    std::vector<pattern::HalvingStep> sched = pattern::halving_schedule(f.vrank, f.p2);
    uint32_t round = 1;
    for (auto it = sched.rbegin(); it != sched.rend(); ++it) {
      Block have = virtual_span(blocks, p, it->keep_lo, it->keep_hi);
      Block get = virtual_span(blocks, p, it->send_lo, it->send_hi);
      int peer = pattern::fold_real_rank(it->partner, p);
      c.sendrecv(peer, c.at(buf, have.offset), have.count * es, peer, c.at(buf, get.offset), get.count * es,
                 step + round++);
    }
  }
  if (f.partner < 0) return;
  const Block all = pattern::span(blocks, 0, p);
  uint32_t last = fold_steps(p) - 1;
  if (f.vrank >= 0) {
    c.send(f.partner, step + last, c.at(buf, all.offset), all.count * es);
  } else {
    c.recv(f.partner, step + last, c.at(buf, all.offset), all.count * es);
  }
}

}  // namespace dcomm::coll
