// --check against an independent in-process simulation of each collective: P workspaces are filled, the
// collective's result is computed here from their send views, and count_wrong() must find nothing; one
// corrupted element must be found.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "tools/bench/args.hpp"
#include "tools/bench/case.hpp"
#include "tools/bench/values.hpp"

using namespace dcomm;
using namespace dcomm::bench;

namespace {

// The reduction of one element's inputs, computed the plain way (no closed forms).
double combine(ReduceOp op, DType t, const std::vector<double>& in) {
  const bool fp = dtype_is_float(t);
  double acc = op == ReduceOp::kPreMulSum ? in[0] * kPreMulScale : in[0];
  auto acc_i = static_cast<int64_t>(in[0]);
  for (std::size_t r = 1; r < in.size(); ++r) {
    const auto v_i = static_cast<int64_t>(in[r]);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += in[r]; break;
      case ReduceOp::kPreMulSum: acc += in[r] * kPreMulScale; break;
      case ReduceOp::kProd: acc *= in[r]; acc_i *= v_i; break;
      case ReduceOp::kMin: acc = std::min(acc, in[r]); break;
      case ReduceOp::kMax: acc = std::max(acc, in[r]); break;
      case ReduceOp::kBAnd: acc_i &= v_i; break;
      case ReduceOp::kBOr: acc_i |= v_i; break;
      case ReduceOp::kBXor: acc_i ^= v_i; break;
    }
  }
  const double p = static_cast<double>(in.size());
  if (op == ReduceOp::kAvg) return fp ? acc / p : std::trunc(acc / p);
  if (op == ReduceOp::kBAnd || op == ReduceOp::kBOr || op == ReduceOp::kBXor) return static_cast<double>(acc_i);
  if (op == ReduceOp::kProd && !fp) return static_cast<double>(acc_i);
  return acc;
}

struct World {
  std::vector<Case> cases;
  std::vector<std::unique_ptr<Workspace>> ws;
  std::vector<std::vector<double>> sent;  // each rank's send view, read before any result is written

  World(Case c, int p) {
    for (int r = 0; r < p; ++r) {
      c.rank = r;
      c.world = p;
      cases.push_back(c);
      ws.push_back(std::make_unique<Workspace>(c));
    }
  }
  double in(int r, std::size_t i) const { return sent[static_cast<std::size_t>(r)][i]; }
  void put(int r, std::size_t i, double v) { store(ws[static_cast<std::size_t>(r)]->recv().data, cases[0].dtype, i, v); }

  // Runs the collective "by hand" on the host buffers.
  void simulate() {
    const Case& c = cases[0];
    const int p = c.world;
    const std::size_t b = c.layout.block;
    sent.clear();
    for (int r = 0; r < p; ++r) {
      const Buffer& s = ws[static_cast<std::size_t>(r)]->send();
      std::vector<double> v(c.layout.send_count);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = load(s.data, c.dtype, i);
      sent.push_back(v);
    }
    auto reduced = [&](std::size_t i) {
      std::vector<double> col;
      for (int r = 0; r < p; ++r) col.push_back(in(r, i));
      return combine(c.op, c.dtype, col);
    };
    for (int r = 0; r < p; ++r) {
      const auto rb = static_cast<std::size_t>(r) * b;
      switch (c.coll) {
        case Coll::kAllReduce:
          for (std::size_t i = 0; i < c.layout.count; ++i) put(r, i, reduced(i));
          break;
        case Coll::kReduce:
          if (r == c.root) for (std::size_t i = 0; i < c.layout.count; ++i) put(r, i, reduced(i));
          break;
        case Coll::kReduceScatter:
          for (std::size_t i = 0; i < b; ++i) put(r, i, reduced(rb + i));
          break;
        case Coll::kBroadcast:
          for (std::size_t i = 0; i < c.layout.count; ++i) put(r, i, in(c.root, i));
          break;
        case Coll::kScatter:
          for (std::size_t i = 0; i < b; ++i) put(r, i, in(c.root, rb + i));
          break;
        case Coll::kGather:
        case Coll::kAllGather:
          if (c.coll == Coll::kGather && r != c.root) break;
          for (int j = 0; j < p; ++j) for (std::size_t i = 0; i < b; ++i) put(r, j * b + i, in(j, i));
          break;
        case Coll::kAllToAll:
          for (int j = 0; j < p; ++j) for (std::size_t i = 0; i < b; ++i) put(r, j * b + i, in(j, rb + i));
          break;
        case Coll::kSendRecv:
          if (sendrecv_partner(r, p) >= 0) {
            for (std::size_t i = 0; i < c.layout.count; ++i) put(r, i, in(sendrecv_partner(r, p), i));
          }
          break;
        case Coll::kBarrier: break;
      }
    }
  }

  std::size_t round(int iter) {
    for (auto& w : ws) w->fill(iter);
    simulate();
    std::size_t wrong = 0;
    for (auto& w : ws) wrong += w->count_wrong(iter);
    return wrong;
  }
};

Case make(Coll coll, DType t, ReduceOp op, std::size_t bytes, int p, bool inplace) {
  Case c;
  c.coll = coll;
  c.dtype = t;
  c.op = op;
  c.layout = layout(coll, bytes, t, p);
  c.root = p > 1 ? 1 : 0;  // a root other than 0 catches code that assumes 0
  c.inplace = inplace;
  c.check = true;
  return c;
}

}  // namespace

TEST_CASE("a correct result checks clean for every collective, world size and in-place form", "[bench][check]") {
  for (Coll coll : kAllColls) {
    for (int p : {1, 2, 3, 5}) {
      for (bool inplace : {false, true}) {
        // 0, one element, an odd count, and one that does not divide by the world.
        for (std::size_t bytes : {std::size_t{0}, std::size_t{4}, std::size_t{4 * 37}, std::size_t{4 * 101 * 3}}) {
          World w(make(coll, DType::kFloat32, ReduceOp::kSum, bytes, p, inplace), p);
          INFO(to_string(coll) << " P=" << p << " inplace=" << inplace << " bytes=" << bytes);
          CHECK(w.round(0) == 0);
          CHECK(w.round(3) == 0);
        }
      }
    }
  }
}

TEST_CASE("every dtype and op checks clean, and reference values stay exact", "[bench][check]") {
  for (DType t : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      if (!op_fits_dtype(op, t)) continue;
      for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kReduce}) {
        for (int p : {2, 3, 4}) {
          World w(make(coll, t, op, 64 * 24, p, false), p);
          INFO(to_string(coll) << " " << to_string(t) << " " << to_string(op) << " P=" << p);
          CHECK(w.round(1) == 0);
        }
      }
    }
    World moved(make(Coll::kAllToAll, t, ReduceOp::kSum, 8 * 6, 3, false), 3);
    CHECK(moved.round(2) == 0);
  }
}

TEST_CASE("a wrong element, a stale iteration or a swapped block is counted", "[bench][check]") {
  World w(make(Coll::kAllGather, DType::kInt32, ReduceOp::kSum, 4 * 9, 3, false), 3);
  for (auto& ws : w.ws) ws->fill(4);
  w.simulate();
  store(w.ws[2]->recv().data, DType::kInt32, 5, 1000);
  CHECK(w.ws[0]->count_wrong(4) == 0);
  CHECK(w.ws[2]->count_wrong(4) == 1);
  // Checked against the next iteration's values, last iteration's data is wrong almost everywhere.
  CHECK(w.ws[0]->count_wrong(5) >= 8);

  World ar(make(Coll::kAllReduce, DType::kBFloat16, ReduceOp::kSum, 2 * 10, 2, true), 2);
  for (auto& ws : ar.ws) ws->fill(0);  // in place and never reduced: the inputs are not the sums
  CHECK(ar.ws[0]->count_wrong(0) == 10);
}

TEST_CASE("values: 16-bit floats round-trip the small integers the check uses", "[bench][check]") {
  unsigned char cell[8];
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    for (double v : {0.0, 1.0, 3.0, 101.0, 255.0, -7.0, 0.5}) {
      store(cell, t, 0, v);
      CHECK(load(cell, t, 0) == v);
    }
  }
  store(cell, DType::kInt8, 0, 200);  // wraps as int8 does
  CHECK(load(cell, DType::kInt8, 0) == -56);
  CHECK(matches(3.0, 3.0, DType::kFloat16));
  CHECK_FALSE(matches(3.0, 4.0, DType::kFloat16));
  CHECK_FALSE(matches(3.0, 3.0001, DType::kFloat64));
}
