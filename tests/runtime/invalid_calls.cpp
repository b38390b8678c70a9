// Calls invalid on one rank only, at every position (invalid_calls.hpp).

#include "tests/runtime/invalid_calls.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <set>

#include "tests/runtime/ranks.hpp"

namespace dcomm::test {

namespace {

constexpr std::size_t kBlock = 5;  // elements per rank's block: odd, so no size lines up with another by chance

double value(int rank, std::size_t i, int salt) { return salted_value(rank, i, salt); }
std::vector<double> values(int rank, std::size_t n, int salt) { return salted_values(rank, n, salt); }

// One call's buffers and what a valid call would leave in `out` on this rank (empty: no output here).
struct Call {
  std::vector<double> send, recv, expect;
  bool out_is_send = false;  // broadcast: the result is in `send`
  const std::vector<double>& out() const { return out_is_send ? send : recv; }
};

// A byte size that overflows: 2^61 + 1 float64 is 2^64 + 8 bytes, which wraps to 8.
constexpr std::size_t kOverflowingCount = (std::size_t{1} << 61) + 1;

struct BadCall {
  const char* name;
  const char* reason;  // what the error must say about the mistake
  bool rooted;
  bool root_only;  // the mistake is in a buffer only the root passes
  // Issues the call with the mistake on rank `bad`; fills `c`.
  WorkPtr (*issue)(ProcessGroup& pg, int bad, int root, const CollectiveOptions& o, Call& c, int salt);
};

Buffer null_of(std::size_t n) { return Buffer(nullptr, n, DType::kFloat64); }

// A gather of kBlock values per rank: every rank's send, a recv of P blocks, and the root's expected result.
void prepare_gather(ProcessGroup& pg, int root, Call& c, int salt) {
  const int p = pg.size(), r = pg.rank();
  c.send = values(r, kBlock, salt);
  c.recv.assign(static_cast<std::size_t>(p) * kBlock, 0.0);
  if (r != root) return;
  for (int q = 0; q < p; ++q) {
    for (std::size_t i = 0; i < kBlock; ++i) c.expect.push_back(value(q, i, salt));
  }
}

std::vector<BadCall> bad_calls() {
  return {
      {"all_reduce with a null send buffer", "send is null but its count is 5", false, false,
       [](ProcessGroup& pg, int bad, int, const CollectiveOptions& o, Call& c, int salt) {
         const int p = pg.size(), r = pg.rank();
         c.send = values(r, kBlock, salt);
         c.recv.assign(kBlock, 0.0);
         c.expect.assign(kBlock, 0.0);
         for (int q = 0; q < p; ++q) {
           for (std::size_t i = 0; i < kBlock; ++i) c.expect[i] += value(q, i, salt);
         }
         return pg.all_reduce(r == bad ? null_of(kBlock) : Buffer(c.send), Buffer(c.recv), ReduceOp::kSum, o);
       }},
      {"all_reduce with a count whose bytes overflow", "the byte size overflows", false, false,
       [](ProcessGroup& pg, int bad, int, const CollectiveOptions& o, Call& c, int salt) {
         const int p = pg.size(), r = pg.rank();
         c.send = values(r, kBlock, salt);
         c.expect.assign(kBlock, 0.0);
         for (int q = 0; q < p; ++q) {
           for (std::size_t i = 0; i < kBlock; ++i) c.expect[i] += value(q, i, salt);
         }
         c.out_is_send = true;
         Buffer b(c.send);
         if (r == bad) b.count = kOverflowingCount;
         return pg.all_reduce(b, ReduceOp::kSum, o);
       }},
      {"broadcast with a null buffer", "buffer is null but its count is 5", true, false,
       [](ProcessGroup& pg, int bad, int root, const CollectiveOptions& o, Call& c, int salt) {
         const int r = pg.rank();
         c.send = values(r, kBlock, salt);
         c.expect = values(root, kBlock, salt);
         c.out_is_send = true;
         return pg.broadcast(r == bad ? null_of(kBlock) : Buffer(c.send), root, o);
       }},
      {"scatter with the root's send buffer too small", "send has count", true, true,
       [](ProcessGroup& pg, int bad, int root, const CollectiveOptions& o, Call& c, int salt) {
         const auto p = static_cast<std::size_t>(pg.size());
         const int r = pg.rank();
         c.send = values(r, p * kBlock, salt);
         c.recv.assign(kBlock, 0.0);
         for (std::size_t i = 0; i < kBlock; ++i) c.expect.push_back(value(root, static_cast<std::size_t>(r) * kBlock + i, salt));
         Buffer send(c.send);
         if (r == bad) send.count -= 1;
         return pg.scatter(send, Buffer(c.recv), root, o);
       }},
      {"gather with the root's recv buffer too small", "recv has count", true, true,
       [](ProcessGroup& pg, int bad, int root, const CollectiveOptions& o, Call& c, int salt) {
         const int r = pg.rank();
         prepare_gather(pg, root, c, salt);
         Buffer recv(c.recv);
         if (r == bad) recv.count -= 1;
         return pg.gather(Buffer(c.send), recv, root, o);
       }},
      {"gather with a null send buffer", "send is null but its count is 5", true, false,
       [](ProcessGroup& pg, int bad, int root, const CollectiveOptions& o, Call& c, int salt) {
         const int r = pg.rank();
         prepare_gather(pg, root, c, salt);
         return pg.gather(r == bad ? null_of(kBlock) : Buffer(c.send), Buffer(c.recv), root, o);
       }},
      {"gather whose P blocks overflow", "the byte size overflows", true, false,
       [](ProcessGroup& pg, int bad, int root, const CollectiveOptions& o, Call& c, int salt) {
         const int p = pg.size(), r = pg.rank();
         prepare_gather(pg, root, c, salt);
         Buffer send(c.send), recv(c.recv);
         if (r == bad) {  // one block fits in a byte count, P of them do not
           send.count = static_cast<std::size_t>(PTRDIFF_MAX) / sizeof(double) / static_cast<std::size_t>(p) + 1;
           recv.count = send.count * static_cast<std::size_t>(p);
         }
         return pg.gather(send, recv, root, o);
       }},
      {"all_gather with a recv buffer too small", "recv has count", false, false,
       [](ProcessGroup& pg, int bad, int, const CollectiveOptions& o, Call& c, int salt) {
         const int p = pg.size(), r = pg.rank();
         c.send = values(r, kBlock, salt);
         c.recv.assign(static_cast<std::size_t>(p) * kBlock, 0.0);
         for (int q = 0; q < p; ++q) {
           for (std::size_t i = 0; i < kBlock; ++i) c.expect.push_back(value(q, i, salt));
         }
         Buffer recv(c.recv);
         if (r == bad) recv.count -= 1;
         return pg.all_gather(Buffer(c.send), recv, o);
       }},
      {"all_to_all with a null recv buffer", "recv is null", false, false,
       [](ProcessGroup& pg, int bad, int, const CollectiveOptions& o, Call& c, int salt) {
         const auto p = static_cast<std::size_t>(pg.size());
         const int r = pg.rank();
         c.send = values(r, p * kBlock, salt);
         c.recv.assign(p * kBlock, 0.0);
         for (std::size_t q = 0; q < p; ++q) {  // block r of rank q lands in block q here
           for (std::size_t i = 0; i < kBlock; ++i) {
             c.expect.push_back(value(static_cast<int>(q), static_cast<std::size_t>(r) * kBlock + i, salt));
           }
         }
         return pg.all_to_all(Buffer(c.send), r == bad ? null_of(p * kBlock) : Buffer(c.recv), o);
       }},
      {"reduce with the root's recv count wrong", "recv has count 6 but must have 5", true, true,
       [](ProcessGroup& pg, int bad, int root, const CollectiveOptions& o, Call& c, int salt) {
         const int p = pg.size(), r = pg.rank();
         c.send = values(r, kBlock, salt);
         c.recv.assign(kBlock + 1, 0.0);
         if (r == root) {
           c.expect.assign(kBlock + 1, 0.0);
           for (int q = 0; q < p; ++q) {
             for (std::size_t i = 0; i < kBlock; ++i) c.expect[i] += value(q, i, salt);
           }
         }
         Buffer recv(c.recv);
         if (r != bad) recv.count = kBlock;
         return pg.reduce(Buffer(c.send), recv, root, ReduceOp::kSum, o);
       }},
      {"reduce_scatter with a send count off by one", "send has count", false, false,
       [](ProcessGroup& pg, int bad, int, const CollectiveOptions& o, Call& c, int salt) {
         const auto p = static_cast<std::size_t>(pg.size());
         const int r = pg.rank();
         c.send = values(r, p * kBlock + 1, salt);
         c.recv.assign(kBlock, 0.0);
         c.expect.assign(kBlock, 0.0);
         for (std::size_t q = 0; q < p; ++q) {
           for (std::size_t i = 0; i < kBlock; ++i) {
             c.expect[i] += value(static_cast<int>(q), static_cast<std::size_t>(r) * kBlock + i, salt);
           }
         }
         Buffer send(c.send);
         if (r != bad) send.count = p * kBlock;
         return pg.reduce_scatter(send, Buffer(c.recv), ReduceOp::kSum, o);
       }},
  };
}

// First, middle and last rank, once each.
std::vector<int> positions(int size) {
  std::set<int> s = {0, size / 2, size - 1};
  return {s.begin(), s.end()};
}

int overcommit_mode() {
  std::ifstream f("/proc/sys/vm/overcommit_memory");
  int mode = 0;
  f >> mode;
  return mode;
}

std::string describe(const Error& e) { return fmt::format("{}: {}", to_string(e.code()), e.what()); }

// Whether `w` is the check's error for the bad call: it names rank `bad` and the mistake.
bool names_bad_call(const std::string& w, const BadCall& b, int bad) {
  return w.find(fmt::format("invalid on rank {}:", bad)) != std::string::npos && w.find(b.reason) != std::string::npos;
}

// The error of a call that did not run because a rank learned only then that the bad call failed (a rooted call's
// side that only sends returns before seeing every call: docs/errors.md).
bool is_late_notice(const std::string& w, const BadCall& b, int bad) {
  return w.find("learned only at this call") != std::string::npos && names_bad_call(w, b, bad);
}

// The call after a failed one must pair with the other ranks' call after it and give the right sum. `late`: this
// rank returned from the bad call before seeing every call, so this call must fail with the bad call's error;
// otherwise it may fail so (a rank that returned early tells the others in its part of it), once. Then the next
// call must be right.
void check_next_call(ProcessGroup& pg, const std::function<WorkPtr()>& issue, const std::function<WorkPtr()>& again,
                     std::vector<double>& x, int salt, const BadCall& b, int bad, bool late, const std::string& label,
                     std::vector<std::string>& failures) {
  try {
    issue()->wait();
    if (late) {
      failures.push_back(fmt::format("{}: returned success from the bad call and never learned that it failed: the "
                                     "next all_reduce succeeded too",
                                     label));
      return;
    }
  } catch (const InvalidUsageError& e) {
    if (!is_late_notice(e.what(), b, bad)) {
      failures.push_back(fmt::format("{}: the next all_reduce failed, but not as a late notice of rank {}'s bad call: "
                                     "{}",
                                     label, bad, describe(e)));
      return;
    }
    try {
      again()->wait();
    } catch (const Error& e2) {
      failures.push_back(fmt::format("{}: the all_reduce after the late notice failed: {}", label, describe(e2)));
      return;
    }
  } catch (const Error& e) {
    failures.push_back(fmt::format("{}: the next all_reduce failed: {}", label, describe(e)));
    return;
  }
  for (std::size_t i = 0; i < x.size(); ++i) {
    double want = 0;
    for (int q = 0; q < pg.size(); ++q) want += value(q, i, salt);
    if (x[i] != want) {
      failures.push_back(fmt::format("{}: the next all_reduce gave {} at element {} where {} is right; the calls "
                                     "pair out of step",
                                     label, x[i], i, want));
      return;
    }
  }
}

// The call after a failed one, for the cases where no late notice may come.
void check_next_call(ProcessGroup& pg, const std::function<WorkPtr()>& issue, std::vector<double>& x, int salt,
                     const std::string& label, std::vector<std::string>& failures) {
  static const BadCall none{"", "\x01never", false, false, nullptr};
  check_next_call(pg, issue, issue, x, salt, none, -1, false, label, failures);
}

// What the bad call did on this rank: true when it failed naming the bad rank; false when it returned (allowed for
// a rooted call with the right data: the next call must then fail, check_next_call); or a recorded failure.
bool judge(const BadCall& b, int bad, const Call& c, const std::function<void()>& wait, const std::string& label,
           std::vector<std::string>& failures) {
  try {
    wait();
    bool right = c.expect.empty() || std::equal(c.expect.begin(), c.expect.end(), c.out().begin());
    if (right && b.rooted) return false;
    failures.push_back(fmt::format("{}: returned success{}", label,
                                   right ? " although rank " + std::to_string(bad) + "'s call was invalid"
                                         : " with data that differs from the serial reference (a silent wrong answer)"));
  } catch (const InvalidUsageError& e) {
    std::string w = e.what();
    if (!names_bad_call(w, b, bad)) {
      failures.push_back(fmt::format("{}: the error does not name rank {} and '{}': {}", label, bad, b.reason, w));
    }
  } catch (const Error& e) {
    failures.push_back(fmt::format("{}: raised {} instead of InvalidUsageError", label, describe(e)));
  } catch (const std::exception& e) {
    failures.push_back(fmt::format("{}: raised a non-dcomm exception: {}", label, e.what()));
  }
  return true;
}

}  // namespace

int check_invalid_calls(ProcessGroup& pg, std::vector<std::string>& failures, const InvalidCallOptions& opts) {
  const int p = pg.size();
  CollectiveOptions o, next_o;
  o.async_op = next_o.async_op = opts.async_op;
  o.algorithm = opts.algorithm;
  int tried = 0, salt = 0;
  for (const BadCall& b : bad_calls()) {
    if (!opts.only.empty() && std::string(b.name).find(opts.only) == std::string::npos) continue;
    for (int bad : positions(p)) {
      std::vector<int> roots = {0};
      if (b.rooted) roots = b.root_only || p == 1 ? std::vector<int>{bad} : std::vector<int>{bad, (bad + 1) % p};
      for (int root : roots) {
        ++salt;
        const std::string label =
            fmt::format("{} on rank {} of {}{}{}{}", b.name, bad, p, b.rooted ? fmt::format(", root {}", root) : "",
                        opts.async_op ? ", async" : "", opts.algorithm.empty() ? "" : ", by " + opts.algorithm);
        Call c;
        WorkPtr work;
        // The same size as most bad calls, so that a next call paired out of step passes as a silent wrong answer.
        std::vector<double> next = values(pg.rank(), kBlock, salt);
        WorkPtr next_work;
        std::string next_failed;  // a blocking next call that threw (after a bad call that returned)
        // The bad call may throw at once (a blocking call) or through its handle (async).
        const bool failed = judge(b, bad, c,
                                  [&] {
                                    work = b.issue(pg, bad, root, o, c, salt);
                                    try {
                                      next_work = pg.all_reduce(Buffer(next), ReduceOp::kSum, next_o);
                                    } catch (const InvalidUsageError& e) {
                                      next_failed = e.what();
                                    }
                                    work->wait();
                                  },
                                  label, failures);
        auto again = [&] { return pg.all_reduce(Buffer(next), ReduceOp::kSum, next_o); };
        check_next_call(
            pg,
            [&] {
              if (!next_failed.empty()) throw InvalidUsageError(next_failed);
              return next_work ? next_work : again();
            },
            again, next, salt, b, bad, !failed, label, failures);
        ++tried;
      }
    }
  }
  return tried;
}

void check_overflowing_counts(ProcessGroup& pg, std::vector<std::string>& failures) {
  std::vector<float> x(8, 1.0f), y(8 * static_cast<std::size_t>(pg.size()));
  auto expect_invalid = [&](const char* what, const std::function<void()>& call, const char* says = "overflows") {
    try {
      call();
      failures.push_back(fmt::format("{}: accepted", what));
    } catch (const InvalidUsageError& e) {
      if (std::string(e.what()).find(says) == std::string::npos) {
        failures.push_back(fmt::format("{}: the error does not say '{}': {}", what, says, e.what()));
      }
    } catch (const std::exception& e) {
      failures.push_back(fmt::format("{}: raised something other than InvalidUsageError: {}", what, e.what()));
    }
  };
  // 2^62 + 2 float32 is 2^64 + 8 bytes: unchecked, it wraps to 8 bytes and the reduction runs off the buffer.
  expect_invalid("all_reduce of 2^62 + 2 float32 on every rank", [&] {
    pg.all_reduce(Buffer(x.data(), (std::size_t{1} << 62) + 2), ReduceOp::kSum);
  });
  expect_invalid("all_gather whose P blocks overflow on every rank", [&] {
    std::size_t n = static_cast<std::size_t>(PTRDIFF_MAX) / sizeof(float) / static_cast<std::size_t>(pg.size()) + 1;
    pg.all_gather(Buffer(x.data(), n), Buffer(y.data(), n * static_cast<std::size_t>(pg.size())));
  });
  // 2^40 float32 (4 TiB) on a small buffer: the scratch an algorithm would take cannot be had. Every rank learns it
  // in the call check (rank 0, the lowest, is named), instead of a std::bad_alloc on each. Where the kernel grants
  // any allocation (vm.overcommit_memory = 1) the probe succeeds and the algorithm would read past the buffer.
  if (overcommit_mode() != 1) {
    expect_invalid(
        "all_reduce of 2^40 float32 on every rank",
        [&] { pg.all_reduce(Buffer(x.data(), std::size_t{1} << 40), ReduceOp::kSum); }, "invalid on rank 0: ");
  }
  std::vector<double> next = values(pg.rank(), 7, 99);
  check_next_call(pg, [&] { return pg.all_reduce(Buffer(next), ReduceOp::kSum); }, next, 99,
                  "after the overflowing counts", failures);
}

}  // namespace dcomm::test
