// Rooted small calls through the slots: eager return, flow control, mismatches (rooted_calls.hpp).

#include "tests/runtime/rooted_calls.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <set>

#include "collectives/slots.hpp"
#include "tests/runtime/ranks.hpp"
#include <thread>

namespace dcomm::test {

namespace {

constexpr auto kCallTimeout = std::chrono::seconds(20);
constexpr auto kStoreWait = std::chrono::seconds(30);

double value(int rank, std::size_t i, int salt) { return salted_value(rank, i, salt); }
std::vector<double> values(int rank, std::size_t n, int salt) { return salted_values(rank, n, salt); }

// One call as one rank makes it.
struct Call {
  Collective coll = Collective::kBroadcast;
  int root = 0;
  std::size_t count = 1;  // elements per rank's block
  ReduceOp op = ReduceOp::kSum;
};

// One rank's buffers and what its output must hold afterwards (empty: no output on this rank).
struct Bufs {
  std::vector<double> send, recv, expect;
  bool out_is_send = false;
  const std::vector<double>& out() const { return out_is_send ? send : recv; }
};

// Whether this rank's part of `c` only sends (slots.hpp: it returns once its data is published).
bool sends_only(const Call& c, int rank) {
  if (c.coll == Collective::kBroadcast || c.coll == Collective::kScatter) return rank == c.root;
  return rank != c.root;
}

// Issues `c` on this rank (blocking) after filling its buffers and its expected output for call `salt`.
void run_call(ProcessGroup& pg, const Call& c, int salt, Bufs& b) {
  const int p = pg.size(), r = pg.rank();
  const auto P = static_cast<std::size_t>(p);
  CollectiveOptions o;
  o.timeout = kCallTimeout;
  b = Bufs{};
  switch (c.coll) {
    case Collective::kBroadcast:
      b.send = values(r, c.count, salt);  // a non-root's own values: a broadcast that did not arrive shows
      b.expect = values(c.root, c.count, salt);
      b.out_is_send = true;
      pg.broadcast(Buffer(b.send), c.root, o)->wait();
      return;
    case Collective::kScatter:
      b.send = values(r, c.count * P, salt);
      b.recv.assign(c.count, -7.0);
      for (std::size_t i = 0; i < c.count; ++i) b.expect.push_back(value(c.root, static_cast<std::size_t>(r) * c.count + i, salt));
      pg.scatter(Buffer(b.send), Buffer(b.recv), c.root, o)->wait();
      return;
    case Collective::kReduce:
      b.send = values(r, c.count, salt);
      b.recv.assign(c.count, -7.0);
      if (r == c.root) {
        b.expect.assign(c.count, 0.0);
        for (int q = 0; q < p; ++q) {
          for (std::size_t i = 0; i < c.count; ++i) {
            b.expect[i] = q == 0 ? value(q, i, salt)
                          : c.op == ReduceOp::kMin ? std::min(b.expect[i], value(q, i, salt))
                                                   : b.expect[i] + value(q, i, salt);
          }
        }
      }
      pg.reduce(Buffer(b.send), Buffer(b.recv), c.root, c.op, o)->wait();
      return;
    case Collective::kGather:
    case Collective::kAllGather:
      b.send = values(r, c.count, salt);
      b.recv.assign(c.count * P, -7.0);
      if (c.coll == Collective::kAllGather || r == c.root) {
        for (int q = 0; q < p; ++q) {
          for (std::size_t i = 0; i < c.count; ++i) b.expect.push_back(value(q, i, salt));
        }
      }
      if (c.coll == Collective::kGather) {
        pg.gather(Buffer(b.send), Buffer(b.recv), c.root, o)->wait();
      } else {
        pg.all_gather(Buffer(b.send), Buffer(b.recv), o)->wait();
      }
      return;
    default:
      throw InvalidUsageError("rooted_calls: no such case");
  }
}

std::string name(const Call& c) {
  return fmt::format("{}(root {}, count {}, op {})", to_string(c.coll), c.root, c.count, to_string(c.op));
}

// Records a failure unless this rank's output is its call's serial reference.
void check_output(const Bufs& b, const std::string& label, std::vector<std::string>& failures) {
  if (b.expect.empty()) return;
  const auto& out = b.out();
  for (std::size_t i = 0; i < b.expect.size(); ++i) {
    if (out[i] != b.expect[i]) {
      failures.push_back(fmt::format("{}: element {} is {} where {} is right", label, i, out[i], b.expect[i]));
      return;
    }
  }
}

std::vector<int> roots_of(int p) {
  std::set<int> s = {0, p - 1};
  return {s.begin(), s.end()};
}

const Collective kRooted[] = {Collective::kBroadcast, Collective::kScatter, Collective::kReduce, Collective::kGather};

// A call that differs on one rank: what every rank calls, and what the odd rank calls instead.
struct Mismatch {
  const char* what;
  Call all, odd;
};

// How the mismatched call went on this rank.
enum class Outcome { kReturned, kRaised, kBroken };

// Makes this rank's part of the mismatched call: it may return where this rank could not see every call (its data
// must then come from a call that matches its own), else it raises the check's error, which names the odd rank.
Outcome run_mismatched(ProcessGroup& pg, const Call& mine, int salt, const std::string& label,
                       const std::string& names_odd, std::vector<std::string>& failures) {
  Bufs b;
  try {
    run_call(pg, mine, salt, b);
    check_output(b, label + ", returned", failures);
    return Outcome::kReturned;
  } catch (const InvalidUsageError& e) {
    if (std::string(e.what()).find(names_odd) == std::string::npos) {
      failures.push_back(fmt::format("{}: the error does not say '{}': {}", label, names_odd, e.what()));
    }
    return Outcome::kRaised;
  } catch (const Error& e) {
    failures.push_back(fmt::format("{}: raised {} instead of InvalidUsageError: {}", label, to_string(e.code()),
                                   e.what()));
    return Outcome::kBroken;
  }
}

}  // namespace

void check_rooted_eager(ProcessGroup& pg, std::vector<std::string>& failures) {
  const int p = pg.size(), r = pg.rank();
  if (p < 2) return;
  auto store = pg.store();
  int salt = 0;
  for (Collective coll : kRooted) {
    for (int root : roots_of(p)) {
      for (std::size_t count : {1, 7, 50}) {  // 50 x 5 ranks x 8 B: a scatter still fits one slot
        const Call c{coll, root, count};
        const std::string label = fmt::format("{} of {} ranks", name(c), p);
        const std::string key = fmt::format("test/rooted/eager/{}/", ++salt);
        // The ranks that read wait until every sender's call has returned: a call that still synchronised every
        // rank would hold its sender until the timeout.
        if (!sends_only(c, r)) {
          std::vector<std::string> keys;
          for (int q = 0; q < p; ++q) {
            if (sends_only(c, q)) keys.push_back(key + std::to_string(q));
          }
          try {
            store->wait(keys, kStoreWait);
          } catch (const Error& e) {
            failures.push_back(fmt::format("{}: the senders did not return before this rank made the call: {}",
                                           label, e.what()));
          }
        }
        Bufs b;
        try {
          run_call(pg, c, salt, b);
          check_output(b, label, failures);
          if (sends_only(c, r)) std::fill(b.send.begin(), b.send.end(), -1.0);  // the caller's buffer again
        } catch (const Error& e) {
          failures.push_back(fmt::format("{}: failed: {}", label, e.what()));
        }
        if (sends_only(c, r)) store->set(key + std::to_string(r), Store::Bytes{1});
      }
    }
  }
}

void check_rooted_flow(ProcessGroup& pg, std::vector<std::string>& failures) {
  const int p = pg.size(), r = pg.rank();
  if (p < 2) return;
  auto store = pg.store();
  constexpr int kCalls = 40;
  int salt = 1000;
  for (Collective coll : {Collective::kReduce, Collective::kBroadcast}) {
    const Call c{coll, p - 1, 9};
    const std::string key = fmt::format("test/rooted/flow/{}/", static_cast<int>(coll));
    for (int k = 0; k < kCalls; ++k) {
      const std::string label = fmt::format("{} of {} ranks, call {}", name(c), p, k);
      if (!sends_only(c, r)) {
        // The slow side. The senders run ahead of it without it: each returns from calls k and k + 1 before this
        // rank makes call k (bounded by kStoreWait).
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        for (int q = 0; q < p; ++q) {
          if (!sends_only(c, q)) continue;
          static_assert(coll::kCallsAhead >= 2, "the senders must be able to run two calls ahead");
          const int64_t ahead = std::min(k + 2, kCalls);
          const auto give_up = std::chrono::steady_clock::now() + kStoreWait;
          int64_t returned = store->add(key + std::to_string(q), 0);
          while (returned < ahead && std::chrono::steady_clock::now() < give_up) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            returned = store->add(key + std::to_string(q), 0);
          }
          if (returned < ahead) {
            failures.push_back(fmt::format("{}: sender rank {} returned from {} calls in {} s before this rank made "
                                           "call {}: it does not run ahead of its reader",
                                           label, q, returned, kStoreWait.count(), k));
          }
          // This rank has published call k - 1: a sender may publish through call k - 1 + kCallsAhead.
          if (returned > k + static_cast<int64_t>(coll::kCallsAhead)) {
            failures.push_back(fmt::format("{}: sender rank {} had returned from {} calls before this rank, which "
                                           "reads it, made call {}: more than {} calls ahead",
                                           label, q, returned, k, coll::kCallsAhead));
          }
        }
      }
      Bufs b;
      try {
        run_call(pg, c, ++salt, b);
        check_output(b, label, failures);
        if (sends_only(c, r)) {
          std::fill(b.send.begin(), b.send.end(), -1.0);
          store->add(key + std::to_string(r), 1);
        }
      } catch (const Error& e) {
        failures.push_back(fmt::format("{}: failed: {}", label, e.what()));
        return;
      }
    }
  }
}

void check_rooted_mismatch(ProcessGroup& pg, std::vector<std::string>& failures) {
  const int p = pg.size(), r = pg.rank();
  if (p < 2) return;
  const int odd = p - 1;
  const std::vector<Mismatch> cases = {
      {"reduce, the odd rank names another root", {Collective::kReduce, 0, 5}, {Collective::kReduce, 1, 5}},
      {"reduce, the odd rank takes min", {Collective::kReduce, 0, 5}, {Collective::kReduce, 0, 5, ReduceOp::kMin}},
      {"broadcast, the odd rank names itself root", {Collective::kBroadcast, 0, 5}, {Collective::kBroadcast, odd, 5}},
      {"broadcast, the odd rank passes another count", {Collective::kBroadcast, 0, 5}, {Collective::kBroadcast, 0, 6}},
      {"scatter, the odd rank passes another count", {Collective::kScatter, 0, 5}, {Collective::kScatter, 0, 6}},
      {"gather, the odd rank calls all_gather", {Collective::kGather, 0, 5}, {Collective::kAllGather, 0, 5}},
      {"gather to the last rank, the odd rank names rank 0", {Collective::kGather, odd, 5}, {Collective::kGather, 0, 5}},
  };
  const std::string names_odd = fmt::format("rank {} called", odd);
  int salt = 2000;
  for (const Mismatch& m : cases) {
    const std::string label = fmt::format("{} ({} ranks)", m.what, p);
    // Every rank makes the common call twice first: the engine then takes the mismatched call on the ranks that
    // repeat it for a repeat of the last shape (collectives/call_shape.hpp), and the check must catch it all the same.
    for (int rep = 0; rep < 2; ++rep) {
      Bufs b;
      try {
        run_call(pg, m.all, ++salt, b);
        check_output(b, label + ", before", failures);
      } catch (const Error& e) {
        failures.push_back(fmt::format("{}: the common call before failed: {}", label, e.what()));
        return;
      }
    }
    const Outcome outcome = run_mismatched(pg, r == odd ? m.odd : m.all, ++salt, label, names_odd, failures);
    if (outcome == Outcome::kBroken) return;
    const bool returned = outcome == Outcome::kReturned;
    // The next call: a rank that returned learns of the mismatch now; the others may fail it (they read it).
    std::vector<double> next = values(r, 3, ++salt);
    bool failed_next = false;
    try {
      pg.all_reduce(Buffer(next), ReduceOp::kSum)->wait();
      if (returned) {
        failures.push_back(fmt::format("{}: returned from the mismatched call and its next call succeeded: it never "
                                       "learned of the mismatch",
                                       label));
      }
    } catch (const InvalidUsageError& e) {
      failed_next = true;
      const std::string w = e.what();
      if (w.find("learned only at this call") == std::string::npos || w.find(names_odd) == std::string::npos) {
        failures.push_back(fmt::format("{}: the next call failed, but not as the late notice of the mismatch: {}",
                                       label, w));
      }
    } catch (const Error& e) {
      failures.push_back(fmt::format("{}: the next call raised {}: {}", label, to_string(e.code()), e.what()));
      return;
    }
    // Then the group is in step: this call (or the one after a late notice) is right everywhere.
    try {
      if (failed_next) pg.all_reduce(Buffer(next), ReduceOp::kSum)->wait();
      for (std::size_t i = 0; i < next.size(); ++i) {
        double want = 0;
        for (int q = 0; q < p; ++q) want += value(q, i, salt);
        if (next[i] != want) {
          failures.push_back(fmt::format("{}: the all_reduce after gave {} where {} is right: out of step", label,
                                         next[i], want));
          break;
        }
      }
    } catch (const Error& e) {
      failures.push_back(fmt::format("{}: the all_reduce after the late notice failed: {}", label, e.what()));
      return;
    }
  }
}

void check_rooted_mismatch_later(ProcessGroup& pg, std::vector<std::string>& failures) {
  const int p = pg.size(), r = pg.rank();
  if (p < 2) return;
  const int odd = p - 1;
  // Broadcast: the root only sends; reduce: the non-roots only send and the root reads every slot (on 2 ranks
  // each reads the other's: the check's agreement lines, slots.cpp).
  const std::vector<Mismatch> cases = {
      {"broadcast, the odd rank passes another count", {Collective::kBroadcast, 0, 3}, {Collective::kBroadcast, 0, 4}},
      {"reduce, the odd rank takes min", {Collective::kReduce, 0, 3}, {Collective::kReduce, 0, 3, ReduceOp::kMin}},
  };
  const std::string names_odd = fmt::format("rank {} called", odd);
  constexpr int kBefore = static_cast<int>(coll::kSlotDepth) + 7;  // the slots have gone round before it
  // More than a rank that returned may take to learn (slots.hpp: kSlotDepth - kCallsAhead).
  constexpr int kAfter = static_cast<int>(coll::kSlotDepth - coll::kCallsAhead) + 12;
  int salt = 5000;
  // The mismatch at three places in the blocks of kSettleBatch exchanges by which a reading rank's agreement lines
  // go (slot_layout.hpp): a line that covered the mismatch wrongly would show at one of them.
  for (const Mismatch& m : cases) for (int shift : {0, 5, 10}) {
    const std::string label = fmt::format("{} ({} ranks, {} calls before)", m.what, p, kBefore + shift);
    try {
      for (int k = 0; k < kBefore + shift; ++k) {
        Bufs b;
        run_call(pg, m.all, ++salt, b);
        check_output(b, label + ", before", failures);
      }
    } catch (const Error& e) {
      failures.push_back(fmt::format("{}: a common call before failed: {}", label, e.what()));
      return;
    }
    const Outcome outcome = run_mismatched(pg, r == odd ? m.odd : m.all, ++salt, label, names_odd, failures);
    if (outcome == Outcome::kBroken) return;
    bool learned = outcome == Outcome::kRaised;  // this rank raised the check's error naming the odd rank
    int last_failed = -1;                          // the last of the calls after that failed on this rank
    // Only the common rooted call after it, never a call that reads every slot on every rank: a rank that returned
    // learns of the mismatch at one of them, though the others' later calls agree. The ranks that only send go
    // slowly, so that a rank reading every slot has checked the calls after the mismatched one, too, whenever they
    // look at what it checked (a rank's agreement line must not cover the mismatch: slots.cpp).
    for (int k = 0; k < kAfter; ++k) {
      Bufs b;
      if (sends_only(m.all, r)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      try {
        run_call(pg, m.all, ++salt, b);
        check_output(b, fmt::format("{}, call {} after", label, k), failures);
      } catch (const InvalidUsageError& e) {
        learned = true;
        last_failed = k;
        if (std::string(e.what()).find(names_odd) == std::string::npos) {
          failures.push_back(fmt::format("{}: call {} after failed without naming the odd rank: {}", label, k,
                                         e.what()));
        }
      } catch (const Error& e) {
        failures.push_back(fmt::format("{}: call {} after raised {}: {}", label, k, to_string(e.code()), e.what()));
        return;
      }
    }
    if (!learned) {
      failures.push_back(fmt::format("{}: returned from the mismatched call and never learned of it in {} later "
                                     "calls", label, kAfter));
    }
    if (last_failed >= kAfter - 5) {
      failures.push_back(fmt::format("{}: still failing at call {} after: never back in step", label, last_failed));
    }
  }
}

}  // namespace dcomm::test
