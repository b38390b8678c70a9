// An outside program built against the installed dcomm: one rank, a memory store, one all_reduce.
#include <dcomm/dcomm.hpp>

#include <cstdio>
#include <vector>

int main() {
  dcomm::InitOptions opts;
  opts.rank = 0;
  opts.world_size = 1;
  opts.store = dcomm::make_memory_store();
  opts.transport = "loopback";
  auto pg = dcomm::init(opts);
  std::vector<float> x = {1.5f, -2.0f, 3.25f};
  pg->all_reduce(dcomm::Buffer(x), dcomm::ReduceOp::kSum);
  bool ok = x[0] == 1.5f && x[1] == -2.0f && x[2] == 3.25f;
  std::printf("dcomm %s: rank %d/%d all_reduce %s\n", dcomm::version(), pg->rank(), pg->size(), ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
