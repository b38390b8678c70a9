// A reducing collective around its algorithm (reducing_call.hpp).

#include "collectives/reducing_call.hpp"

#include "collectives/reduce.hpp"

namespace dcomm::coll {

bool needs_work_scratch(const Args& a, int rank) {
  return !(a.coll == Collective::kAllReduce || (a.coll == Collective::kReduce && rank == a.root));
}

void run_reducing(Context& c, const Algorithm& algo, char* scratch) {
  const Args& a = c.args;
  const std::size_t n = a.send.count;
  c.work = scratch != nullptr ? scratch : static_cast<char*>(a.recv.data);
  c.work_count = n;
  c.input = c.work;
  if (a.red.op == ReduceOp::kPreMulSum) {
    scale_into(c.work, a.send.data, n, c.dtype(), a.red.scale, c.device());
  } else if (algo.takes_input) {
    c.input = static_cast<const char*>(a.send.data);  // the algorithm reads it where it is
  } else {
    c.copy(c.work, a.send.data, n);
  }
  algo.run(c);
  Buffer out = a.recv;
  if (a.coll == Collective::kReduceScatter) {
    if (!c.wrote_output) c.copy(out.data, c.at(c.work, static_cast<std::size_t>(c.rank()) * out.count), out.count);
  } else if (a.coll == Collective::kReduce && c.rank() != a.root) {
    return;
  }
  if (a.red.op == ReduceOp::kAvg) divide_by(out.data, out.count, c.dtype(), c.size(), c.device());
}

}  // namespace dcomm::coll
