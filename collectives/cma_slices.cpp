#include "collectives/cma_slices.hpp"

#include <algorithm>
#include <vector>

#include "collectives/patterns.hpp"

namespace dcomm::coll {

namespace {

// Step 2: this rank's slice [offset, offset + count), written to each rank of `to` (this one included or not):
// into the others' work buffers at the slice's place, into this rank's at `local` (its first element).
CmaStatus reduce_slice(const Context& c, const CmaPeers& peers, std::size_t offset, std::size_t count,
                    const std::vector<int>& to, char* local) {
  if (count == 0) return {};
  const int p = c.size();
  const int r = c.rank();
  const std::size_t es = c.esize();
  const std::size_t piece = std::min(count, std::max<std::size_t>(1, std::min(c.chunk_elems(), kCmaPieceBytes / es)));
  Scratch tmp = c.scratch(2 * piece);
  char* theirs = tmp.data();
  char* sum_buf = c.at(tmp.data(), piece);
  const bool keep = std::find(to.begin(), to.end(), r) != to.end();
  // The sum runs in the output itself unless this rank keeps no result, or the output is also its input (in
  // place, or the engine copied the input there) and rank 0's piece would overwrite its own before it is added.
  const bool in_output = keep && !(local == c.at(c.input, offset) && r != 0);
  for (std::size_t done = 0; done < count; done += piece) {
    const std::size_t len = std::min(piece, count - done);
    const std::size_t at = offset + done;
    char* out = c.at(local, done);
    char* acc = in_output ? out : sum_buf;
    for (int q = 0; q < p; ++q) {
      const char* src = c.at(c.input, at);
      if (q != r) {
        char* into = q == 0 ? acc : theirs;
        CmaStatus s = cma_copy(c, peers, q, false, peers.hello[static_cast<std::size_t>(q)].input + at * es, into,
                             len * es);
        if (!s.ok()) return s;
        src = into;
      }
      if (q == 0) {
        if (src != acc) c.copy(acc, src, len);
      } else {
        c.reduce(acc, src, len);
      }
    }
    for (int q : to) {
      if (q == r) {
        if (acc != out) c.copy(out, acc, len);
        continue;
      }
      CmaStatus s = cma_copy(c, peers, q, true, peers.hello[static_cast<std::size_t>(q)].work + at * es, acc, len * es);
      if (!s.ok()) return s;
    }
  }
  return {};
}

}  // namespace

bool cma_reduce(const Context& c, CmaUse& use, int root, uint32_t step) {
  CmaPeers peers;
  if (!cma_exchange(c, use, c.input, c.work, peers, step)) return false;
  // A rank that reduces a slice reads the P-1 other parts of it; off the root it also writes the slice into the
  // root's output, P copies in all where the root makes P-1 - but the root also reads its own part and writes the
  // result where it lies, at memory speed too. Slices weighted 2P for the root against 2P-1 for the others (4:3 at
  // P = 2, 6:5 at P = 3) measured fastest: 2 ranks bound, reduce[cma] mean us, weights 2:1 (the same bytes through
  // process_vm_readv/writev on every rank, session 6 to 29) / 4:3 / 1:1, two runs: 64 KiB 7.6 / 6.5-6.7 / 7.5-7.7,
  // 1 MiB 118-120 / 93-99 / 87-89, 4 MiB 599-602 / 431-439 / 472-508, 16 MiB 2,491-2,505 / 1,780-1,945 /
  // 1,954-2,373, 64 MiB 18.7-19.0 / 16.3-16.5 / 17.6-18.7 ms (session 30); 3 ranks on 2 cores, 3:2 / 6:5: 1 MiB
  // 252-260 / 219-241, 4 MiB 965-987 / 777-884.
  const int p = c.size();
  const std::vector<pattern::Block> slices =
      root >= 0 ? pattern::weighted_blocks(c.work_count, p, root, static_cast<std::size_t>(2 * p),
                                           static_cast<std::size_t>(2 * p - 1))
                : pattern::even_blocks(c.work_count, p);
  const pattern::Block mine = slices[static_cast<std::size_t>(c.rank())];
  std::vector<int> to;
  if (root >= 0) {
    to.push_back(root);
  } else {
    for (int q = 0; q < c.size(); ++q) to.push_back(q);
  }
  CmaStatus s = cma_finish(c, reduce_slice(c, peers, mine.offset, mine.count, to, c.at(c.work, mine.offset)),
                    step + 2 + static_cast<uint32_t>(pattern::ceil_log2(c.size())));
  if (!s.ok()) cma_fail(c, peers, s);
  return true;
}

bool cma_reduce_scatter(const Context& c, CmaUse& use, char* out, uint32_t step) {
  CmaPeers peers;
  if (!cma_exchange(c, use, c.input, out, peers, step)) return false;
  // Block r of every input is rank r's slice; it writes the result only into its own output, so it reads (P-1)/P
  // of n through process_vm_readv and writes nothing into another rank.
  const std::size_t count = c.args.recv.count;
  const std::size_t offset = static_cast<std::size_t>(c.rank()) * count;
  CmaStatus s = cma_finish(c, reduce_slice(c, peers, offset, count, {c.rank()}, out),
                           step + 2 + static_cast<uint32_t>(pattern::ceil_log2(c.size())));
  if (!s.ok()) cma_fail(c, peers, s);
  return true;
}

}  // namespace dcomm::coll
