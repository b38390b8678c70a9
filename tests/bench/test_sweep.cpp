// The sweep's plumbing with threads as ranks: a fake group (a memory store, nothing else) and a fake library
// whose "collective" is a bounded barrier. Rank 0 must gather every rank's timings; a rank that never arrives
// must end the run with a report naming it, never a hang.

#include <catch2/catch.hpp>

#include <dcomm/dcomm.hpp>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "tools/bench/plan.hpp"
#include "tools/bench/sweep.hpp"

using namespace dcomm;
using namespace dcomm::bench;

namespace {

// Only what the sweep uses: rank, size, identity, store, abort.
class FakeGroup : public ProcessGroup {
 public:
  FakeGroup(int rank, int size, std::shared_ptr<Store> store) : store_(std::move(store)) {
    id_.rank = id_.local_rank = rank;
    id_.world_size = id_.local_world_size = size;
  }
  int rank() const override { return id_.rank; }
  int size() const override { return id_.world_size; }
  const Identity& identity() const override { return id_; }
  std::shared_ptr<Store> store() const override { return store_; }
  Duration timeout() const override { return std::chrono::seconds(5); }
  WorkPtr send(const Buffer&, int, int, const P2POptions&) override { return none(); }
  WorkPtr recv(const Buffer&, int, int, const P2POptions&) override { return none(); }
  WorkPtr all_reduce(const Buffer&, const Buffer&, Reduction, const CollectiveOptions&) override { return none(); }
  WorkPtr broadcast(const Buffer&, int, const CollectiveOptions&) override { return none(); }
  WorkPtr reduce(const Buffer&, const Buffer&, int, Reduction, const CollectiveOptions&) override { return none(); }
  WorkPtr scatter(const Buffer&, const Buffer&, int, const CollectiveOptions&) override { return none(); }
  WorkPtr scatterv(const Buffer&, const std::vector<std::size_t>&, const std::vector<std::size_t>&, const Buffer&,
                   int, const CollectiveOptions&) override { return none(); }
  WorkPtr gather(const Buffer&, const Buffer&, int, const CollectiveOptions&) override { return none(); }
  WorkPtr gatherv(const Buffer&, const Buffer&, const std::vector<std::size_t>&, const std::vector<std::size_t>&,
                  int, const CollectiveOptions&) override { return none(); }
  WorkPtr all_gather(const Buffer&, const Buffer&, const CollectiveOptions&) override { return none(); }
  WorkPtr reduce_scatter(const Buffer&, const Buffer&, Reduction, const CollectiveOptions&) override { return none(); }
  WorkPtr all_to_all(const Buffer&, const Buffer&, const CollectiveOptions&) override { return none(); }
  WorkPtr all_to_all_v(const Buffer&, const std::vector<std::size_t>&, const std::vector<std::size_t>&,
                       const Buffer&, const std::vector<std::size_t>&, const std::vector<std::size_t>&,
                       const CollectiveOptions&) override { return none(); }
  WorkPtr barrier(const CollectiveOptions&) override { return none(); }
  std::shared_ptr<ProcessGroup> split(int, int) override { return nullptr; }
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>&) override { return nullptr; }
  std::shared_ptr<ProcessGroup> new_group_of_members(const std::vector<int>&, Store&) override { return nullptr; }
  void set_algorithm(Collective, const std::string&) override {}
  std::string explain(Collective, std::size_t, Device) const override { return ""; }
  void abort() noexcept override { aborted = true; }
  bool aborted = false;

 private:
  static WorkPtr none() { throw InvalidUsageError("FakeGroup: the sweep test's library does the communication"); }
  Identity id_;
  std::shared_ptr<Store> store_;
};

// A reusable barrier whose wait gives up after the case's timeout, as a stuck collective would.
class SharedBarrier {
 public:
  explicit SharedBarrier(int n) : n_(n) {}
  void wait(Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t gen = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(lock, timeout, [&] { return generation_ != gen; })) {
      throw TimeoutError("fake collective: not every rank arrived within the timeout");
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, arrived_ = 0;
  uint64_t generation_ = 0;
};

class BarrierLibrary : public Library {
 public:
  explicit BarrierLibrary(SharedBarrier* b) : b_(b) {}
  std::string name() const override { return "dcomm"; }
  std::string unsupported(const Case&) const override { return ""; }
  void barrier(const Case& c) override { b_->wait(c.timeout); }
  void run_once(const Case& c, const Workspace&) override { b_->wait(c.timeout); }

 private:
  SharedBarrier* b_;
};

// A BarrierLibrary that also writes down its calls: 'b' a barrier, 'r' a call of the collective.
class RecordingLibrary : public BarrierLibrary {
 public:
  RecordingLibrary(SharedBarrier* b, std::string* log) : BarrierLibrary(b), log_(log) {}
  void barrier(const Case& c) override {
    *log_ += 'b';
    BarrierLibrary::barrier(c);
  }
  void run_once(const Case& c, const Workspace& ws) override {
    *log_ += 'r';
    BarrierLibrary::run_once(c, ws);
  }

 private:
  std::string* log_;
};

struct RankOutcome {
  std::vector<Row> rows;
  std::string out;
  std::string failure;
  int code = 0;
  bool aborted = false;
  bool printed = false;
};

std::vector<RankOutcome> run_ranks(const Options& o, int world, std::vector<std::string>* logs = nullptr) {
  auto store = make_memory_store(std::chrono::seconds(20));
  SharedBarrier barrier(world);
  std::vector<RankOutcome> out(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      RankOutcome& me = out[static_cast<std::size_t>(r)];
      auto pg = std::make_shared<FakeGroup>(r, world, store);
      try {
        std::vector<std::unique_ptr<Library>> libs;
        if (logs != nullptr) {
          libs.push_back(std::make_unique<RecordingLibrary>(&barrier, &(*logs)[static_cast<std::size_t>(r)]));
        } else {
          libs.push_back(std::make_unique<BarrierLibrary>(&barrier));
        }
        std::ostringstream text;
        auto groups = plan(o, world, [](Collective) { return std::optional<std::vector<std::string>>{}; });
        me.rows = Sweep(o, pg, std::move(libs)).run(groups, text);
        me.out = text.str();
      } catch (const BenchFailure& e) {
        me.failure = e.what();
        me.code = e.exit_code;
        me.printed = e.printed;
      } catch (const std::exception& e) {
        me.failure = std::string("unexpected: ") + e.what();
        me.code = -1;
      }
      me.aborted = pg->aborted;
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

Options small_options() {
  Options o;
  o.colls = {Coll::kAllGather};
  o.min_bytes = 12;
  o.max_bytes = 48;
  o.iters = 3;
  o.warmup = 1;
  o.timeout_s = 5;
  return o;
}

}  // namespace

TEST_CASE("rank 0 gathers every rank's timings, one row per size", "[bench][sweep]") {
  auto out = run_ranks(small_options(), 3);
  for (const RankOutcome& r : out) CHECK(r.failure.empty());
  REQUIRE(out[0].rows.size() == 3);  // 12, 24, 48 bytes over 3 ranks
  CHECK(out[0].rows[0].bytes == 12);
  CHECK(out[0].rows[2].bytes == 48);
  for (const Row& row : out[0].rows) {
    CHECK(row.ranks.size() == 3);
    CHECK(row.wrong == 0);
    CHECK(row.slowest_rank >= 0);
    CHECK(row.ranks[2].mean_us > 0);
  }
  CHECK(out[1].rows.empty());
  CHECK(out[0].out.find("# Avg bus bandwidth") != std::string::npos);
  CHECK(out[1].out.empty());  // only rank 0 prints
}

TEST_CASE("each size's calls run between two barriers of the library, so every rank's last call ends first",
          "[bench][sweep]") {
  // Without the barrier after the timed calls, a rank whose part returns early went on to the next row (perhaps
  // the other library's spinning barrier) while a peer on its core was still in its last timed call.
  std::vector<std::string> logs(3);
  auto out = run_ranks(small_options(), 3, &logs);
  for (const RankOutcome& r : out) CHECK(r.failure.empty());
  std::string expected;
  for (int size = 0; size < 3; ++size) expected.append("brrrrb");  // a barrier, 1 warm-up and 3 timed calls, a barrier
  for (const std::string& log : logs) CHECK(log == expected);
}

TEST_CASE("a rank that never arrives is named, and every rank ends non-zero", "[bench][sweep][timeout]") {
  Options o = small_options();
  o.timeout_s = 0.5;
  o.stall_rank = 1;
  auto out = run_ranks(o, 3);
  for (int r : {0, 2}) {
    const RankOutcome& me = out[static_cast<std::size_t>(r)];
    INFO("rank " << r << ": " << me.failure);
    CHECK(me.code == 1);
    CHECK(me.failure.rfind("dcomm-bench: error: all_gather[auto] 12 B float32 via dcomm", 0) == 0);
    CHECK(me.failure.find("rank(s) 1 did not arrive at this size") != std::string::npos);
    CHECK(me.aborted);
    CHECK(me.printed);
  }
  CHECK(out[1].code == 1);
  CHECK(out[1].failure.find("--test-stall") != std::string::npos);
}

namespace {

// A library whose first call (the warm-up) takes 50 ms and every later call 1 ms.
class SlowFirstLibrary : public Library {
 public:
  std::string name() const override { return "dcomm"; }
  std::string unsupported(const Case&) const override { return ""; }
  void barrier(const Case&) override {}
  void run_once(const Case&, const Workspace&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(calls_++ == 0 ? 50 : 1));
  }

 private:
  int calls_ = 0;
};

}  // namespace

TEST_CASE("the loop's period spans the timed calls and the gaps between them, not the warm-up", "[bench][sweep]") {
  Case c;
  c.coll = Coll::kAllReduce;
  c.layout = layout(c.coll, 64, c.dtype, 1);
  c.iters = 4;
  c.warmup = 1;
  Workspace ws(c);
  SlowFirstLibrary lib;
  const LocalResult r = measure(lib, c, ws, nullptr);
  REQUIRE(r.times_us.size() == 4);
  double longest = 0, sum = 0;
  for (double t : r.times_us) longest = std::max(longest, t), sum += t;
  CHECK(r.loop_us >= sum / 4);  // every call inside it, each call's share at least the mean call
  CHECK(r.loop_us < 10000);     // the 50 ms warm-up outside it
  CHECK(longest < 10000);
}

namespace {

// Logs its barriers ('b') and calls ('r'), and the first input element each call saw.
class InputLogLibrary : public Library {
 public:
  std::string name() const override { return "dcomm"; }
  std::string unsupported(const Case&) const override { return ""; }
  void barrier(const Case&) override { log += 'b'; }
  void run_once(const Case&, const Workspace& ws) override {
    log += 'r';
    float first = 0;
    std::memcpy(&first, ws.send().data, sizeof first);
    inputs.push_back(first);
  }
  std::string log;
  std::vector<float> inputs;
};

}  // namespace

TEST_CASE("--fresh writes every call's inputs just before it and aligns the ranks; without it they stay as written",
          "[bench][sweep]") {
  // A program's inputs are just computed, still in the writing core's cache, where a single copy reads them
  // 2.6-2.8x slower than the bench's inputs written once (docs/benchmark.md, session 31).
  for (bool fresh : {false, true}) {
    Case c;
    c.coll = Coll::kAllReduce;
    c.layout = layout(c.coll, 4096, c.dtype, 1);
    c.iters = 3;
    c.warmup = 1;
    c.fresh = fresh;
    Workspace ws(c);
    InputLogLibrary lib;
    const LocalResult r = measure(lib, c, ws, nullptr);
    INFO("fresh " << fresh << ": " << lib.log);
    REQUIRE(r.times_us.size() == 3);
    CHECK(lib.log == (fresh ? "bbrbrbrbrb" : "brrrrb"));
    REQUIRE(lib.inputs.size() == 4);
    std::set<float> distinct(lib.inputs.begin(), lib.inputs.end());
    CHECK(distinct.size() == (fresh ? 4u : 1u));
    CHECK((r.loop_us == 0) == fresh);  // no loop's pace with writes and barriers between the calls
  }
}
