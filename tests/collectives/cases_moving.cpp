#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "tests/collectives/cases.hpp"

namespace dcomm::test {

namespace {

void expect(RankState& s, const coll::Algorithm& algo, const Case& c, const std::string& why) {
  if (!why.empty()) s.rec.failures.push_back(describe(algo, c, s.view.size) + ": " + why);
}

Bytes garbage(std::size_t bytes) { return Bytes(bytes, 0xAB); }

}  // namespace

VLayout v_layout(std::size_t base, int size, int shift) {
  VLayout v;
  v.counts.resize(static_cast<std::size_t>(size));
  v.displs.resize(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i)
    v.counts[static_cast<std::size_t>(i)] = (base + static_cast<std::size_t>(2 * i + shift)) % 5;
  for (int i = size - 1; i >= 0; --i) {
    v.displs[static_cast<std::size_t>(i)] = v.extent;
    v.extent += v.counts[static_cast<std::size_t>(i)] + 1;
  }
  return v;
}

void run_broadcast(RankState& s, const coll::Algorithm& algo, const Case& c) {
  Bytes want = make_input(c.dtype, ReduceOp::kSum, c.root, c.count, c.salt);
  Bytes buf = s.view.rank == c.root ? want : garbage(want.size());
  coll::Args a;
  a.coll = Collective::kBroadcast;
  a.root = c.root;
  a.send = a.recv = Buffer(buf.data(), c.count, c.dtype);
  if (!call(s, algo, c, a)) return;
  expect(s, algo, c, check_copy(buf.data(), want, 0, c.count, c.dtype, "buffer"));
  s.rec.digests.push_back(digest(buf.data(), buf.size()));
}

void run_scatter(RankState& s, const coll::Algorithm& algo, const Case& c) {
  const int p = s.view.size;
  const int r = s.view.rank;
  const bool root = r == c.root;
  VLayout v = c.vector_variant ? v_layout(c.count, p, 0) : VLayout{};
  std::size_t mine = c.vector_variant ? v.counts[static_cast<std::size_t>(r)] : c.count;
  std::size_t total = c.vector_variant ? v.extent : c.count * static_cast<std::size_t>(p);
  Bytes full = make_input(c.dtype, ReduceOp::kSum, c.root, total, c.salt);
  Bytes send = root ? full : Bytes{};
  Bytes recv = garbage(mine * dtype_size(c.dtype));
  coll::Args a;
  a.coll = Collective::kScatter;
  a.root = c.root;
  a.vector_variant = c.vector_variant;
  a.send_counts = v.counts;
  a.send_displs = v.displs;
  if (root) a.send = Buffer(send.data(), total, c.dtype);
  a.recv = Buffer(root && c.in_place ? send.data() : recv.data(), mine, c.dtype);
  if (!call(s, algo, c, a)) return;
  std::size_t at = c.vector_variant ? v.displs[static_cast<std::size_t>(r)] : static_cast<std::size_t>(r) * c.count;
  expect(s, algo, c, check_copy(a.recv.data, full, at, mine, c.dtype, "recv"));
}

void run_gather(RankState& s, const coll::Algorithm& algo, const Case& c) {
  const int p = s.view.size;
  const int r = s.view.rank;
  const bool root = r == c.root;
  VLayout v = c.vector_variant ? v_layout(c.count, p, 1) : VLayout{};
  auto count_of = [&](int q) { return c.vector_variant ? v.counts[static_cast<std::size_t>(q)] : c.count; };
  auto at_of = [&](int q) {
    return c.vector_variant ? v.displs[static_cast<std::size_t>(q)] : static_cast<std::size_t>(q) * c.count;
  };
  std::size_t total = c.vector_variant ? v.extent : c.count * static_cast<std::size_t>(p);
  Bytes send = make_input(c.dtype, ReduceOp::kSum, r, count_of(r), c.salt);
  Bytes recv = garbage(root ? total * dtype_size(c.dtype) : 0);
  coll::Args a;
  a.coll = Collective::kGather;
  a.root = c.root;
  a.vector_variant = c.vector_variant;
  a.recv_counts = v.counts;
  a.recv_displs = v.displs;
  a.send = Buffer(send.data(), count_of(r), c.dtype);
  if (root) {
    a.recv = Buffer(recv.data(), total, c.dtype);
    if (c.in_place) {  // the root's data at the start of recv, passed as both buffers
      std::memcpy(recv.data(), send.data(), send.size());
      a.send.data = recv.data();
    }
  }
  if (!call(s, algo, c, a) || !root) return;
  for (int q = 0; q < p; ++q) {
    Bytes want = make_input(c.dtype, ReduceOp::kSum, q, count_of(q), c.salt);
    expect(s, algo, c,
           check_copy(static_cast<char*>(a.recv.data) + at_of(q) * dtype_size(c.dtype), want, 0, count_of(q), c.dtype,
                      fmt::format("block of rank {}", q)));
  }
}

void run_all_gather(RankState& s, const coll::Algorithm& algo, const Case& c) {
  const int p = s.view.size;
  const std::size_t es = dtype_size(c.dtype);
  Bytes send = make_input(c.dtype, ReduceOp::kSum, s.view.rank, c.count, c.salt);
  Bytes recv = garbage(c.count * static_cast<std::size_t>(p) * es);
  coll::Args a;
  a.coll = Collective::kAllGather;
  a.send = Buffer(send.data(), c.count, c.dtype);
  a.recv = Buffer(recv.data(), c.count * static_cast<std::size_t>(p), c.dtype);
  if (c.in_place) {
    std::memcpy(recv.data(), send.data(), send.size());
    a.send.data = recv.data();
  }
  if (!call(s, algo, c, a)) return;
  for (int q = 0; q < p; ++q) {
    Bytes want = make_input(c.dtype, ReduceOp::kSum, q, c.count, c.salt);
    expect(s, algo, c,
           check_copy(recv.data() + static_cast<std::size_t>(q) * c.count * es, want, 0, c.count, c.dtype,
                      fmt::format("block of rank {}", q)));
  }
  s.rec.digests.push_back(digest(recv.data(), recv.size()));
}

void run_all_to_all(RankState& s, const coll::Algorithm& algo, const Case& c) {
  const int p = s.view.size;
  const int r = s.view.rank;
  const std::size_t es = dtype_size(c.dtype);
  const bool v = c.vector_variant;
  auto layout = [&](int q) { return v_layout(c.count + static_cast<std::size_t>(q), p, q); };
  auto send_total_of = [&](int q) { return v ? layout(q).extent : c.count * static_cast<std::size_t>(p); };
  // Where the block rank q sends to rank j sits in q's send buffer, and its count.
  auto out_block = [&](int q, int j) {
    if (!v) return std::pair<std::size_t, std::size_t>(static_cast<std::size_t>(j) * c.count, c.count);
    VLayout l = layout(q);
    return std::pair<std::size_t, std::size_t>(l.displs[static_cast<std::size_t>(j)],
                                               l.counts[static_cast<std::size_t>(j)]);
  };
  std::vector<std::size_t> in_at, in_count;
  std::size_t recv_total = 0;
  for (int i = 0; i < p; ++i) {
    in_count.push_back(out_block(i, r).second);
    in_at.push_back(recv_total);
    recv_total += v ? in_count.back() + 2 : c.count;  // v: a two-element gap after each block
  }
  Bytes send = make_input(c.dtype, ReduceOp::kSum, r, send_total_of(r), c.salt);
  Bytes recv = garbage(recv_total * es);
  coll::Args a;
  a.coll = Collective::kAllToAll;
  a.vector_variant = v;
  if (v) {
    VLayout l = layout(r);
    a.send_counts = l.counts, a.send_displs = l.displs, a.recv_counts = in_count, a.recv_displs = in_at;
  }
  a.send = Buffer(send.data(), send_total_of(r), c.dtype);
  a.recv = Buffer(c.in_place && !v ? send.data() : recv.data(), recv_total, c.dtype);
  if (!call(s, algo, c, a)) return;
  for (int i = 0; i < p; ++i) {
    Bytes src = make_input(c.dtype, ReduceOp::kSum, i, send_total_of(i), c.salt);
    auto [at, n] = out_block(i, r);
    expect(s, algo, c,
           check_copy(static_cast<char*>(a.recv.data) + in_at[static_cast<std::size_t>(i)] * es, src, at, n, c.dtype,
                      fmt::format("block from rank {}", i)));
  }
}

}  // namespace dcomm::test
