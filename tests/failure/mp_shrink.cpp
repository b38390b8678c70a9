// A loop of collectives that survives deaths by shrinking (issue 17). Each rank checks every result against the
// serial reference over the current members; on a failure it shrinks, agrees with the survivors on where to go on
// (the furthest call any survivor finished), and continues. shrink_matrix.py kills ranks and checks what they print.
//   env: ITERS (calls in the loop), PLAN: victims as "launch:iter[:mode]" separated by ',', mode one of
//        kill (SIGKILL itself before call iter), shrink (SIGKILL itself inside shrink(), at the phase
//        SHRINK_FAULT_PHASE names: joined, decided or built; it must first see a failure), stop (SIGSTOP itself before
//        call iter; a child sends SIGCONT after STOP_S seconds); JOIN_S: shrink's join window; SHRINK_TIMEOUT_S: its
//        bound.
//   prints: "KILLED rank L at T", "SHRUNK rank L at T failed [a,b] size S rounds N" (T: seconds since the epoch,
//   after the first correct call on the new group), "EXCLUDED rank L: msg", "WRONG rank L ...", "DONE rank L
//   size S members [..] iters N".
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dcomm/dcomm.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atol(v) : fallback;
}

struct Victim {
  int launch = -1;
  long iter = 0;
  std::string mode;
};

std::vector<Victim> parse_plan(const char* text) {
  std::vector<Victim> out;
  std::stringstream in(text != nullptr ? text : "");
  std::string item;
  while (std::getline(in, item, ',')) {
    Victim v;
    std::stringstream f(item);
    std::string part;
    std::getline(f, part, ':');
    v.launch = std::stoi(part);
    std::getline(f, part, ':');
    v.iter = std::stol(part);
    v.mode = std::getline(f, part, ':') ? part : "kill";
    out.push_back(v);
  }
  return out;
}

int64_t value(int launch, long iter, std::size_t i) {
  return static_cast<int64_t>((launch + 1) * 1000003L + iter * 7919L + static_cast<long>(i) * 31L) % 2001 - 1000;
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) {
    if (!s.empty()) s.push_back(',');
    s.append(std::to_string(x));
  }
  return s;
}

void out(const std::string& line) {
  std::string s = line + "\n";
  std::fputs(s.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

int main() {
  auto group = dcomm::init();
  const int me = group->rank();  // the launch rank
  const long iters = env_long("ITERS", 120);
  const auto plan = parse_plan(std::getenv("PLAN"));
  const auto join_window = std::chrono::seconds(env_long("JOIN_S", 6));
  std::vector<int> members(static_cast<std::size_t>(group->size()));
  for (int r = 0; r < group->size(); ++r) members[static_cast<std::size_t>(r)] = r;
  // Sizes 0, 1, odd, not divisible by any world size here, larger than a chunk.
  const std::size_t sizes[] = {1, 0, 7, 1001, 65539};
  bool die_in_shrink = false;
  bool pending_shrunk = false;
  std::vector<int> failed_all;
  int rounds = 0;
  long iter = 0;
  while (iter < iters) {
    for (const Victim& v : plan) {
      if (v.launch != me || v.iter != iter) continue;
      if (v.mode == "kill") {
        out("KILLED rank " + std::to_string(me) + " at " + std::to_string(now_s()));
        ::raise(SIGKILL);
      } else if (v.mode == "stop") {
        if (::fork() == 0) {
          std::this_thread::sleep_for(std::chrono::seconds(env_long("STOP_S", 10)));
          ::kill(::getppid(), SIGCONT);
          std::_Exit(0);
        }
        out("STOPPED rank " + std::to_string(me) + " at " + std::to_string(now_s()));
        ::raise(SIGSTOP);
      } else if (v.mode == "shrink") {
        die_in_shrink = true;
      }
    }
    try {
      const std::size_t n = sizes[iter % 5];
      std::vector<int64_t> buf(n), want(n, 0);
      for (std::size_t i = 0; i < n; ++i) buf[i] = value(me, iter, i);
      for (int m : members) {
        for (std::size_t i = 0; i < n; ++i) want[i] += value(m, iter, i);
      }
      group->all_reduce(dcomm::Buffer(buf));
      if (buf != want) {
        out("WRONG rank " + std::to_string(me) + " all_reduce iter " + std::to_string(iter) + " members [" +
            join(members) + "]");
        return 3;
      }
      if (pending_shrunk) {
        out("SHRUNK rank " + std::to_string(me) + " at " + std::to_string(now_s()) + " failed [" + join(failed_all) +
            "] size " + std::to_string(group->size()) + " rounds " + std::to_string(rounds));
        pending_shrunk = false;
      }
      ++iter;
    } catch (const dcomm::Error& e) {
      // Dies inside the shrink, at the phase DCOMM_SHRINK_FAULT names (runtime/shrink.cpp).
      if (die_in_shrink) ::setenv("DCOMM_SHRINK_FAULT", std::getenv("SHRINK_FAULT_PHASE"), 1);
      dcomm::ShrinkResult res;
      try {
        res = group->shrink(
            {.timeout = std::chrono::seconds(env_long("SHRINK_TIMEOUT_S", 60)), .join_window = join_window});
      } catch (const dcomm::ExcludedError& x) {
        out("EXCLUDED rank " + std::to_string(me) + ": " + x.what());
        return 4;  // left the job: dcomm-run --keep-going lists it as lost
      }
      std::vector<int> next;
      for (int s : res.survivors) next.push_back(members[static_cast<std::size_t>(s)]);
      for (int f : res.failed) failed_all.push_back(members[static_cast<std::size_t>(f)]);
      members = next;
      rounds += res.rounds;
      group = res.group;
      // Where to go on: the furthest call any survivor finished (one finished it: its result holds).
      std::vector<int64_t> at{iter};
      group->all_reduce(dcomm::Buffer(at), dcomm::Reduction{dcomm::ReduceOp::kMax});
      iter = at[0];
      pending_shrunk = true;
    }
  }
  std::sort(failed_all.begin(), failed_all.end());
  out("DONE rank " + std::to_string(me) + " size " + std::to_string(group->size()) + " members [" + join(members) +
      "] failed [" + join(failed_all) + "] iters " + std::to_string(iter));
  return 0;
}
