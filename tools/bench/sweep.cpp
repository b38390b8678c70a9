#include "tools/bench/sweep.hpp"

#include <dcomm/error.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <ostream>

#include "tools/bench/buffers.hpp"
#include "tools/bench/progress.hpp"
#include "tools/bench/report.hpp"
#include "tools/bench/watchdog.hpp"

namespace dcomm::bench {
namespace {

// How long past its own timeout a call may run before the watchdog reports it: room for the library's own
// timeout error to arrive first.
constexpr std::chrono::seconds kWatchdogGrace{10};

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

Sweep::Sweep(const Options& opts, ProcessGroupPtr pg, std::vector<std::unique_ptr<Library>> libs)
    : opts_(opts),
      pg_(std::move(pg)),
      libs_(std::move(libs)),
      exchange_(make_prefix_store("bench/", pg_->store()), pg_->rank(), pg_->size(),
                std::chrono::duration_cast<Duration>(std::chrono::duration<double>(opts.timeout_s))) {}

Case Sweep::make_case(const Group& g, const Layout& l, const std::string& algo) const {
  Case c;
  c.coll = g.coll;
  c.dtype = g.dtype;
  c.op = g.op;
  c.algo = algo;
  c.layout = l;
  c.root = opts_.root;
  c.inplace = opts_.inplace;
  c.check = opts_.check;
  c.fresh = opts_.fresh;
  c.iters = opts_.iters;
  c.warmup = opts_.warmup;
  c.timeout = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(opts_.timeout_s));
  c.device = opts_.device == Device::Kind::kCuda ? local_cuda_device(pg_->identity().local_rank) : Device::host();
  c.rank = pg_->rank();
  c.world = pg_->size();
  return c;
}

std::string Sweep::describe(const Library& lib, const Case& c) const {
  std::string algo = c.algo.empty() ? "auto" : c.algo;
  if (lib.name() != "dcomm" || c.coll == Coll::kSendRecv) algo = lib.name();
  return fmt::format("{}[{}] {} B {}{}", to_string(c.coll), algo, c.layout.bytes, to_string(c.dtype),
                     is_reducing(c.coll) ? std::string(" ") + to_string(c.op) : "");
}

std::string Sweep::arrival_report(uint64_t seq) {
  try {
    std::vector<int> missing = exchange_.missing(seq);
    if (missing.empty()) return "every rank arrived at this size, so the call itself stalled or failed";
    return fmt::format("rank(s) {} did not arrive at this size - check their output", rank_list(missing));
  } catch (const std::exception& e) {
    return std::string("could not ask the store which ranks arrived: ") + e.what();
  }
}

void Sweep::fail(const Library& lib, const Case& c, uint64_t seq, const std::exception& e) {
  if (dynamic_cast<const InvalidUsageError*>(&e) != nullptr) {
    throw BenchFailure(fmt::format("dcomm-bench: error: {} via {}: {}", describe(lib, c), lib.name(), e.what()), 2);
  }
  std::string msg = fmt::format("dcomm-bench: error: {} via {}, rank {}/{}: {}; {}", describe(lib, c), lib.name(),
                                c.rank, c.world, e.what(), arrival_report(seq));
  // Print before telling the others: once every rank has reported, the launcher may stop this one.
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::fflush(stderr);
  try {
    exchange_.mark_failed(seq);
  } catch (const std::exception&) {
    // The store may be what failed; the message above already says what is known.
  }
  pg_->abort();
  throw BenchFailure(msg, 1, true);
}

void Sweep::report_stuck() {
  std::lock_guard<std::mutex> lock(current_mu_);
  std::fprintf(stderr, "dcomm-bench: error: %s, rank %d/%d: no return after %.1f s (timeout %.1f s); %s\n",
               current_.c_str(), pg_->rank(), pg_->size(),
               opts_.timeout_s + static_cast<double>(kWatchdogGrace.count()), opts_.timeout_s,
               arrival_report(current_seq_).c_str());
}

Row Sweep::run_case(Library& lib, const Case& c) {
  const uint64_t seq = seq_++;
  if (std::string why = lib.unsupported(c); !why.empty()) return skipped_row(c, lib.name(), why);
  if (opts_.stall_rank == c.rank && seq == 0) {
    // The test hook: never arrive, wait until every other rank has reported the stall, then fail too.
    const auto wait = std::chrono::duration_cast<Duration>(2 * c.timeout + kWatchdogGrace * 3);
    exchange_.wait_failed(seq, c.world - 1, wait);
    throw BenchFailure(fmt::format("dcomm-bench: error: rank {}/{} skipped {} on purpose (--test-stall)", c.rank,
                                   c.world, describe(lib, c)), 1);
  }
  {
    std::lock_guard<std::mutex> lock(current_mu_);
    current_ = describe(lib, c) + " via " + lib.name();
    current_seq_ = seq;
  }
  std::vector<LocalResult> all;
  try {
    exchange_.arrive(seq);
    Workspace ws(c);
    Watchdog watchdog(c.timeout + std::chrono::duration_cast<Duration>(kWatchdogGrace), [this] { report_stuck(); });
    exchange_.publish(seq, measure(lib, c, ws, &watchdog));
    if (c.rank == 0) all = exchange_.collect(seq);
  } catch (const BenchFailure&) {
    throw;
  } catch (const InvalidUsageError& e) {
    // With --algo all, an algorithm may not take every call (shm_direct stops at 16 MiB; some skip v-variants).
    // Every rank refuses alike, before any I/O, so every rank skips the row.
    if (std::string(e.what()).find("does not handle this call") == std::string::npos) fail(lib, c, seq, e);
    return c.rank == 0 ? skipped_row(c, lib.name(), "the algorithm does not handle this call") : Row{};
  } catch (const std::exception& e) {
    fail(lib, c, seq, e);
  }
  if (c.rank != 0) return Row{};
  Row row = make_row(c, lib.name(), all);
  try {
    row.chosen = lib.chosen(c);
  } catch (const std::exception&) {
    // Only a label: a group that cannot explain itself leaves it "auto".
  }
  return row;
}

std::vector<Row> Sweep::run(const std::vector<Group>& plan, std::ostream& out) {
  const bool vs = libs_.size() > 1;
  const bool lead = pg_->rank() == 0;
  std::size_t total = 0;
  for (const Group& g : plan) total += g.layouts.size();
  Progress progress(total, lead);
  std::vector<Row> rows;
  if (lead) out << table_header(vs) << std::endl;
  Coll section = plan.empty() ? Coll::kAllReduce : plan.front().coll;
  for (const Group& g : plan) {
    // With several collectives, a line names each one's section of the table.
    if (lead && (g.coll != section || &g == &plan.front()) && opts_.colls.size() > 1) {
      progress.clear();
      out << "# " << to_string(g.coll) << '\n';
    }
    section = g.coll;
    for (const Layout& l : g.layouts) {
      std::vector<Row> size_rows;
      for (const std::string& algo : g.algos) size_rows.push_back(run_case(*libs_[0], make_case(g, l, algo)));
      if (vs) {
        Row peer = run_case(*libs_[1], make_case(g, l, ""));
        for (Row& r : size_rows) {
          if (r.skipped.empty() && peer.skipped.empty() && peer.time_us.mean > 0) {
            r.vs_mpi = r.time_us.mean / peer.time_us.mean;
          }
        }
        size_rows.push_back(std::move(peer));
      }
      if (!lead) continue;
      progress.clear();
      for (const Row& r : size_rows) out << table_line(r, vs) << '\n';
      out.flush();
      progress.step(fmt::format("{} {} B", to_string(g.coll), l.bytes));
      rows.insert(rows.end(), size_rows.begin(), size_rows.end());
    }
  }
  progress.finish();
  if (lead) out << table_footer(rows) << std::flush;
  return rows;
}

}  // namespace dcomm::bench
