#include "tools/bench/run_dcomm.hpp"

#include "dcomm_config.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include "tools/bench/args.hpp"

namespace dcomm::bench {
namespace {

constexpr int kPingTag = 7;

class DcommLibrary : public Library {
 public:
  explicit DcommLibrary(ProcessGroupPtr pg) : pg_(std::move(pg)) {}
  std::string name() const override { return "dcomm"; }
  std::string unsupported(const Case&) const override { return ""; }

  // explain() ends with "choice: NAME (...)"; anything else leaves the row's algorithm as "auto".
  std::string chosen(const Case& c) const override {
    Collective dc{};
    if (!c.algo.empty() || !to_collective(c.coll, &dc)) return "";
    const std::string text = pg_->explain(dc, c.layout.bytes, c.device);
    // DCOMM_BENCH_EXPLAIN=1: the whole of it (every candidate's predicted time), on rank 0's stderr.
    static const bool print = std::getenv("DCOMM_BENCH_EXPLAIN") != nullptr && std::string(std::getenv("DCOMM_BENCH_EXPLAIN")) == "1";
    if (print) std::fprintf(stderr, "%s: %zu B\n%s\n", to_string(c.coll), c.layout.bytes, text.c_str());
    const auto at = text.rfind("choice: ");
    if (at == std::string::npos) return "";
    const auto start = at + 8;
    return text.substr(start, text.find_first_of(" \n", start) - start);
  }

  void barrier(const Case& c) override {
    CollectiveOptions o;  // the group's own barrier algorithm, not the one under test
    o.timeout = c.timeout;
    pg_->barrier(o)->wait(c.timeout);
  }

  void run_once(const Case& c, const Workspace& ws) override {
    CollectiveOptions o;
    o.algorithm = c.algo;
    o.timeout = c.timeout;
    const Buffer& s = ws.send();
    const Buffer& r = ws.recv();
    const Reduction red(c.op, kPreMulScale);
    WorkPtr w;
    switch (c.coll) {
      case Coll::kAllReduce: w = pg_->all_reduce(s, r, red, o); break;
      case Coll::kBroadcast: w = pg_->broadcast(r, c.root, o); break;
      case Coll::kReduce: w = pg_->reduce(s, r, c.root, red, o); break;
      case Coll::kScatter: w = pg_->scatter(s, r, c.root, o); break;
      case Coll::kGather: w = pg_->gather(s, r, c.root, o); break;
      case Coll::kAllGather: w = pg_->all_gather(s, r, o); break;
      case Coll::kReduceScatter: w = pg_->reduce_scatter(s, r, red, o); break;
      case Coll::kAllToAll: w = pg_->all_to_all(s, r, o); break;
      case Coll::kBarrier: w = pg_->barrier(o); break;
      case Coll::kSendRecv: ping_pong(c, s, r); return;
    }
    w->wait(c.timeout);
  }

 private:
  // The lower rank of a pair sends first; the time is the round trip (measure() halves it).
  void ping_pong(const Case& c, const Buffer& s, const Buffer& r) {
    const int partner = sendrecv_partner(c.rank, c.world);
    if (partner < 0) return;
    const P2POptions o{c.timeout, false, nullptr};
    if (c.rank < partner) {
      pg_->send(s, partner, kPingTag, o)->wait(c.timeout);
      pg_->recv(r, partner, kPingTag, o)->wait(c.timeout);
    } else {
      pg_->recv(r, partner, kPingTag, o)->wait(c.timeout);
      pg_->send(s, partner, kPingTag, o)->wait(c.timeout);
    }
  }

  ProcessGroupPtr pg_;
};

}  // namespace

std::unique_ptr<Library> make_dcomm_library(ProcessGroupPtr pg) { return std::make_unique<DcommLibrary>(std::move(pg)); }

std::optional<std::vector<std::string>> registered_algorithms(Collective c) {
  return dcomm::algorithms(c);
}

}  // namespace dcomm::bench
