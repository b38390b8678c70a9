// One rank of a job started by mpirun with no MASTER_ADDR/MASTER_PORT: dcomm::init() finds its identity in
// mpirun's variables and the store on the job's own port; an all_reduce of values that differ on every rank and
// index is checked against the serial sum. The group stays up for a moment so that two jobs overlap.
//   mpirun -n 3 mpirun_job
#include <chrono>
#include <cstdio>
#include <dcomm/dcomm.hpp>
#include <thread>
#include <vector>

int main() {
  auto pg = dcomm::init();
  const int n = 1031;
  std::vector<int64_t> x(n);
  for (int i = 0; i < n; ++i) x[i] = 1000 * (pg->rank() + 1) + i;
  pg->all_reduce(dcomm::Buffer(x), dcomm::ReduceOp::kSum);
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    int64_t want = 0;
    for (int r = 0; r < pg->size(); ++r) want += 1000 * (r + 1) + i;
    wrong += x[i] != want;
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  pg->barrier();
  std::printf("rank %d/%d: %s\n", pg->rank(), pg->size(), wrong == 0 ? "ok" : "WRONG");
  return wrong == 0 ? 0 : 1;
}
