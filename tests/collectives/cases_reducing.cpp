#include <fmt/format.h>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/topology.hpp"
#include "tests/collectives/cases.hpp"

namespace dcomm::test {

namespace {

std::vector<Bytes> all_inputs(const Case& c, int size, std::size_t count) {
  std::vector<Bytes> in;
  for (int q = 0; q < size; ++q) in.push_back(make_input(c.dtype, c.red.op, q, count, c.salt));
  return in;
}

void expect(RankState& s, const coll::Algorithm& algo, const Case& c, const std::string& why) {
  if (!why.empty()) s.rec.failures.push_back(describe(algo, c, s.view.size) + ": " + why);
}

}  // namespace

void run_all_reduce(RankState& s, const coll::Algorithm& algo, const Case& c) {
  std::vector<Bytes> in = all_inputs(c, s.view.size, c.count);
  Bytes send = in[static_cast<std::size_t>(s.view.rank)];
  Bytes recv(send.size(), 0xCD);
  coll::Args a;
  a.coll = Collective::kAllReduce;
  a.red = c.red;
  a.send = Buffer(send.data(), c.count, c.dtype);
  a.recv = c.in_place ? a.send : Buffer(recv.data(), c.count, c.dtype);
  if (!call(s, algo, c, a)) return;
  expect(s, algo, c, check_reduction(a.recv.data, c.count, c.dtype, c.red, in, 0));
  s.rec.digests.push_back(digest(a.recv.data, a.recv.bytes()));
}

void run_reduce(RankState& s, const coll::Algorithm& algo, const Case& c) {
  std::vector<Bytes> in = all_inputs(c, s.view.size, c.count);
  Bytes send = in[static_cast<std::size_t>(s.view.rank)];
  bool root = s.view.rank == c.root;
  Bytes recv(root ? send.size() : 0, 0xCD);
  coll::Args a;
  a.coll = Collective::kReduce;
  a.red = c.red;
  a.root = c.root;
  a.send = Buffer(send.data(), c.count, c.dtype);
  if (root) a.recv = c.in_place ? a.send : Buffer(recv.data(), c.count, c.dtype);
  if (!call(s, algo, c, a)) return;
  if (root) expect(s, algo, c, check_reduction(a.recv.data, c.count, c.dtype, c.red, in, 0));
}

void run_reduce_scatter(RankState& s, const coll::Algorithm& algo, const Case& c) {
  const auto p = static_cast<std::size_t>(s.view.size);
  std::vector<Bytes> in = all_inputs(c, s.view.size, p * c.count);
  Bytes send = in[static_cast<std::size_t>(s.view.rank)];
  Bytes recv(c.count * dtype_size(c.dtype), 0xCD);
  coll::Args a;
  a.coll = Collective::kReduceScatter;
  a.red = c.red;
  a.send = Buffer(send.data(), p * c.count, c.dtype);
  a.recv = Buffer(c.in_place ? send.data() : recv.data(), c.count, c.dtype);
  if (!call(s, algo, c, a)) return;
  expect(s, algo, c,
         check_reduction(a.recv.data, c.count, c.dtype, c.red, in, static_cast<std::size_t>(s.view.rank) * c.count));
}

void run_case(RankState& s, const coll::Algorithm& algo, const Case& c) {
  // The hierarchical rows refuse a group on one node (tests/collectives/test_hier.cpp gives them several).
  if (algo.supports == &coll::supports_hier && !coll::spans_nodes(s.view)) return;
  switch (algo.collective) {
    case Collective::kAllReduce:
      return run_all_reduce(s, algo, c);
    case Collective::kReduce:
      return run_reduce(s, algo, c);
    case Collective::kReduceScatter:
      return run_reduce_scatter(s, algo, c);
    case Collective::kBroadcast:
      return run_broadcast(s, algo, c);
    case Collective::kScatter:
      return run_scatter(s, algo, c);
    case Collective::kGather:
      return run_gather(s, algo, c);
    case Collective::kAllGather:
      return run_all_gather(s, algo, c);
    case Collective::kAllToAll:
      return run_all_to_all(s, algo, c);
    case Collective::kBarrier: {
      coll::Args a;
      a.coll = Collective::kBarrier;
      call(s, algo, c, a);
      return;
    }
  }
}

std::string describe(const coll::Algorithm& algo, const Case& c, int size) {
  return fmt::format("{}[{}] P={} dtype={} op={} count={} {} root={}{}", to_string(algo.collective), algo.name, size,
                     to_string(c.dtype), to_string(c.red.op), c.count, c.in_place ? "in-place" : "out-of-place", c.root,
                     c.vector_variant ? " v-variant" : "");
}

bool call(RankState& s, const coll::Algorithm& algo, const Case& c, const coll::Args& a) {
  try {
    s.engine.run(a, algo.name, Deadline::after(std::chrono::seconds(60)), s.seq++);
    return true;
  } catch (const std::exception& e) {
    s.rec.failures.push_back(describe(algo, c, s.view.size) + " threw: " + e.what());
    throw;  // the group is out of step now; stop this rank
  }
}

}  // namespace dcomm::test
