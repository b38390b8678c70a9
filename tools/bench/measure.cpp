#include <chrono>

#include "tools/bench/library.hpp"
#include "tools/bench/watchdog.hpp"

namespace dcomm::bench {

LocalResult measure(Library& lib, const Case& c, Workspace& ws, Watchdog* watchdog) {
  LocalResult out;
  out.times_us.reserve(static_cast<std::size_t>(c.iters));
  // Without --check the inputs are written once; an in-place reduction then compounds over the iterations,
  // which costs the same time.
  if (!c.check) ws.fill(0);
  if (watchdog) watchdog->arm();
  lib.barrier(c);
  if (watchdog) watchdog->disarm();
  std::chrono::steady_clock::time_point first{}, last{};
  for (int k = 0; k < c.warmup + c.iters; ++k) {
    if (c.check || c.fresh) ws.fill(k);
    if (c.fresh) {
      // The inputs are still in the writing core's cache, as a program's just computed ones are; the barrier keeps
      // the ranks' different writing times out of the call's.
      if (watchdog) watchdog->arm();
      lib.barrier(c);
      if (watchdog) watchdog->disarm();
    }
    if (watchdog) watchdog->arm();
    const auto t0 = std::chrono::steady_clock::now();
    lib.run_once(c, ws);
    device_sync(c.device);
    const auto t1 = std::chrono::steady_clock::now();
    if (watchdog) watchdog->disarm();
    if (k == c.warmup) first = t0;
    last = t1;
    // sendrecv is a ping-pong: report the one-way time, half the round trip, as OSU's latency test does.
    const double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    if (k >= c.warmup) out.times_us.push_back(c.coll == Coll::kSendRecv ? us / 2 : us);
    if (c.check) out.wrong += ws.count_wrong(k);
  }
  if (c.iters > 0 && !c.fresh) {  // with --fresh the writes and barriers between calls are no loop's pace
    const double us = std::chrono::duration<double, std::micro>(last - first).count() / c.iters;
    out.loop_us = c.coll == Coll::kSendRecv ? us / 2 : us;
  }
  // Every rank's last call ends before any rank moves on (untimed): a rank whose part returns early (a rooted
  // call's sender) would otherwise go on to the next case - maybe the other library's barrier, spinning on the core
  // its root shares where ranks outnumber cores - and the root's last timed call would wait for that core.
  if (watchdog) watchdog->arm();
  lib.barrier(c);
  if (watchdog) watchdog->disarm();
  return out;
}

}  // namespace dcomm::bench
