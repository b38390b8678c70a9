#include "collectives/patterns.hpp"

#include <algorithm>

namespace dcomm::coll::pattern {

std::vector<Block> even_blocks(std::size_t count, int parts) {
  std::vector<Block> out(static_cast<std::size_t>(parts));
  std::size_t base = count / static_cast<std::size_t>(parts);
  std::size_t extra = count % static_cast<std::size_t>(parts);
  std::size_t offset = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = {offset, base + (i < extra ? 1 : 0)};
    offset += out[i].count;
  }
  return out;
}

std::vector<Block> weighted_blocks(std::size_t count, int parts, int heavy, std::size_t heavy_weight,
                                   std::size_t weight) {
  const std::size_t total = heavy_weight + static_cast<std::size_t>(parts - 1) * weight;
  // count·heavy_weight / total, rounded down, without overflowing for counts near 2^64.
  const std::size_t big = total == 0 ? 0 : count / total * heavy_weight + count % total * heavy_weight / total;
  const std::vector<Block> rest = even_blocks(count - big, parts - 1);
  std::vector<Block> out(static_cast<std::size_t>(parts));
  std::size_t offset = 0;
  for (int i = 0, j = 0; i < parts; ++i) {
    out[static_cast<std::size_t>(i)] = {offset, i == heavy ? big : rest[static_cast<std::size_t>(j++)].count};
    offset += out[static_cast<std::size_t>(i)].count;
  }
  return out;
}

std::vector<Block> blocks_from(const std::vector<std::size_t>& counts, const std::vector<std::size_t>& displs) {
  std::vector<Block> out(counts.size());
  std::size_t packed = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    out[i] = {displs.empty() ? packed : displs[i], counts[i]};
    packed += counts[i];
  }
  return out;
}

std::vector<Block> pieces(Block b, std::size_t max_count) {
  max_count = std::max<std::size_t>(max_count, 1);
  std::vector<Block> out;
  std::size_t at = b.offset;
  do {
    std::size_t n = std::min(max_count, b.end() - at);
    out.push_back({at, n});
    at += n;
  } while (at < b.end());
  return out;
}

Block span(const std::vector<Block>& blocks, int first, int last) {
  if (first >= last) return {blocks[static_cast<std::size_t>(first)].offset, 0};
  std::size_t lo = blocks[static_cast<std::size_t>(first)].offset;
  return {lo, blocks[static_cast<std::size_t>(last - 1)].end() - lo};
}

int ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

int floor_pow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

TreeNode binomial_tree(int rank, int size, int root) {
  TreeNode node;
  int vr = mod(rank - root, size);
  int mask = 1;
  // Children sit at vr + 2^k for every 2^k below vr's lowest set bit (below size for the root).
  while (mask < size) {
    if (vr & mask) {
      node.parent = (vr - mask + root) % size;
      break;
    }
    if (vr + mask < size) node.children.push_back((vr + mask + root) % size);
    mask <<= 1;
  }
  return node;
}

int binomial_subtree_size(int rank, int size, int root) {
  int vr = mod(rank - root, size);
  int mask = 1;
  while (mask < size && !(vr & mask)) mask <<= 1;
  return std::min(mask, size - vr);
}

Fold fold(int rank, int size) {
  Fold f;
  f.p2 = floor_pow2(size);
  f.rem = size - f.p2;
  if (rank < 2 * f.rem) {
    f.partner = rank ^ 1;
    f.vrank = (rank % 2 == 1) ? rank / 2 : -1;
  } else {
    f.vrank = rank - f.rem;
  }
  return f;
}

int fold_real_rank(int vrank, int size) {
  int rem = size - floor_pow2(size);
  return vrank < rem ? 2 * vrank + 1 : vrank + rem;
}

void fold_real_span(int vrank, int size, int* first, int* last) {
  int rem = size - floor_pow2(size);
  *first = vrank < rem ? 2 * vrank : vrank + rem;
  *last = vrank < rem ? 2 * vrank + 2 : vrank + rem + 1;
}

std::vector<HalvingStep> halving_schedule(int vrank, int p2) {
  std::vector<HalvingStep> steps;
  int lo = 0, hi = p2;
  for (int dist = p2 / 2; dist >= 1; dist /= 2) {
    HalvingStep s;
    s.partner = vrank ^ dist;
    int mid = lo + (hi - lo) / 2;
    if (vrank & dist) {  // upper half of the current range stays here
      s.send_lo = lo, s.send_hi = mid, s.keep_lo = mid, s.keep_hi = hi;
    } else {
      s.send_lo = mid, s.send_hi = hi, s.keep_lo = lo, s.keep_hi = mid;
    }
    lo = s.keep_lo;
    hi = s.keep_hi;
    steps.push_back(s);
  }
  return steps;
}

std::vector<int> doubling_partners(int vrank, int p2) {
  std::vector<int> out;
  for (int dist = 1; dist < p2; dist *= 2) out.push_back(vrank ^ dist);
  return out;
}

std::vector<BruckStep> bruck_schedule(int rank, int size) {
  std::vector<BruckStep> out;
  for (int held = 1; held < size; held *= 2) {
    out.push_back({mod(rank - held, size), (rank + held) % size, std::min(held, size - held), held});
  }
  return out;
}

namespace {

// NCCL's in-order binary tree over ranks 0..n-1, rooted at 0 (which has a single child).
BinaryNode btree(int rank, int n) {
  BinaryNode node;
  int bit = 1;
  while (bit < n && !(bit & rank)) bit <<= 1;
  if (rank == 0) {
    node.child0 = n > 1 ? bit >> 1 : -1;
    return node;
  }
  int up = (rank ^ bit) | (bit << 1);
  if (up >= n) up = rank ^ bit;
  node.parent = up;
  int low = bit >> 1;
  if (low == 0) return node;
  node.child0 = rank - low;
  int down1 = rank + low;
  while (low > 0 && down1 >= n) {
    low >>= 1;
    down1 = rank + low;
  }
  node.child1 = low > 0 ? down1 : -1;
  return node;
}

int map_back(int x, int n, bool mirror) {
  if (x < 0) return x;
  return mirror ? n - 1 - x : (x + 1) % n;
}

}  // namespace

BinaryNode double_tree(int rank, int size, int which) {
  if (which == 0) return btree(rank, size);
  bool mirror = size % 2 == 0;
  BinaryNode t = btree(mirror ? size - 1 - rank : mod(rank - 1, size), size);
  return {map_back(t.parent, size, mirror), map_back(t.child0, size, mirror), map_back(t.child1, size, mirror)};
}

}  // namespace dcomm::coll::pattern
