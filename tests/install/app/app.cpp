// An outside program built against the installed dcomm: every rank all_reduces values that differ per rank and
// index, and checks the sums. Started by the installed dcomm-run.
#include <dcomm/dcomm.hpp>

#include <cstdio>
#include <vector>

int main() {
  auto pg = dcomm::init();
  const int n = 5;
  std::vector<double> x(n);
  for (int i = 0; i < n; ++i) x[i] = 100.0 * pg->rank() + i + 0.5;
  pg->all_reduce(dcomm::Buffer(x), dcomm::ReduceOp::kSum);
  bool ok = true;
  for (int i = 0; i < n; ++i) {
    double want = 0;
    for (int r = 0; r < pg->size(); ++r) want += 100.0 * r + i + 0.5;
    ok = ok && x[i] == want;
  }
  std::printf("dcomm %s: rank %d/%d all_reduce %s\n", dcomm::version(), pg->rank(), pg->size(), ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
