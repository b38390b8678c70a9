// shares_cores(), cores_alone(), never_run_together() and may_share_core(): how a rank's waits spin, from the
// affinity every local rank published; and QuickSpins, what a wait learns of where an unbound peer runs.

#include <catch2/catch.hpp>

#include "transports/placement.hpp"
#include "transports/quick_spins.hpp"

using dcomm::transport::PeerInfo;
using dcomm::transport::cores_alone;
using dcomm::transport::may_share_core;
using dcomm::transport::QuickSpins;
using dcomm::transport::never_run_together;
using dcomm::transport::shares_cores;

namespace {

PeerInfo on(const std::string& host, std::vector<int> cpus) {
  PeerInfo p;
  p.host_id = host;
  p.cpus = std::move(cpus);
  return p;
}

}  // namespace

TEST_CASE("ranks bound one to a core own their cores", "[placement]") {
  // mpirun --bind-to core with 2 ranks on 2 cores: each sees one core, yet nobody shares.
  std::vector<PeerInfo> peers{on("a", {0}), on("a", {1})};
  CHECK_FALSE(shares_cores(peers, 0));
  CHECK_FALSE(shares_cores(peers, 1));
}

TEST_CASE("unbound ranks share when they outnumber the cores", "[placement]") {
  std::vector<PeerInfo> two{on("a", {0, 1}), on("a", {0, 1})};
  CHECK_FALSE(shares_cores(two, 0));
  std::vector<PeerInfo> three{on("a", {0, 1}), on("a", {0, 1}), on("a", {0, 1})};
  for (int r = 0; r < 3; ++r) CHECK(shares_cores(three, r));
}

TEST_CASE("two ranks bound to one core share it; a third on its own core does not", "[placement]") {
  // mpirun --bind-to core --oversubscribe with 3 ranks on 2 cores places ranks 0 and 2 on core 0.
  std::vector<PeerInfo> peers{on("a", {0}), on("a", {1}), on("a", {0})};
  CHECK(shares_cores(peers, 0));
  CHECK_FALSE(shares_cores(peers, 1));
  CHECK(shares_cores(peers, 2));
}

TEST_CASE("ranks on other nodes do not count", "[placement]") {
  std::vector<PeerInfo> peers{on("a", {0, 1}), on("a", {0, 1}), on("b", {0, 1}), on("b", {0, 1}), on("b", {0, 1})};
  CHECK_FALSE(shares_cores(peers, 0));
  CHECK_FALSE(shares_cores(peers, 1));
  CHECK(shares_cores(peers, 2));
}

TEST_CASE("an unknown affinity overlaps everyone", "[placement]") {
  std::vector<PeerInfo> peers{on("a", {0}), on("a", {}), on("a", {1})};
  CHECK(shares_cores(peers, 0));  // ranks 0 and 1 may both run on core 0
  CHECK(shares_cores(peers, 1));  // three ranks, two cores
}

TEST_CASE("a rank is alone on its cores only when every other local rank is bound elsewhere", "[placement]") {
  std::vector<PeerInfo> bound{on("a", {0}), on("a", {1})};  // mpirun --bind-to core
  CHECK(cores_alone(bound, 0));
  CHECK(cores_alone(bound, 1));
  std::vector<PeerInfo> unbound{on("a", {0, 1}), on("a", {0, 1})};  // --bind-to none: the scheduler may stack them
  CHECK_FALSE(cores_alone(unbound, 0));
  std::vector<PeerInfo> stacked{on("a", {0}), on("a", {1}), on("a", {0})};
  CHECK_FALSE(cores_alone(stacked, 0));
  CHECK(cores_alone(stacked, 1));
  std::vector<PeerInfo> unknown{on("a", {0}), on("a", {})};  // an unknown affinity may be anywhere
  CHECK_FALSE(cores_alone(unknown, 0));
  CHECK_FALSE(cores_alone(unknown, 1));
  std::vector<PeerInfo> nodes{on("a", {0}), on("b", {0})};  // the same core number on another node is not ours
  CHECK(cores_alone(nodes, 0));
}

TEST_CASE("a pair never runs together only when both are bound to the same single core", "[placement]") {
  // mpirun --bind-to core --oversubscribe, 3 ranks on 2 cores: ranks 0 and 2 on core 0, rank 1 on core 1. The
  // node shares its cores, yet ranks 0 and 1 run at once (shm streams between them: measured, not refused).
  std::vector<PeerInfo> three{on("a", {0}), on("a", {1}), on("a", {0})};
  CHECK(shares_cores(three, 0));
  CHECK_FALSE(never_run_together(three[0], three[1]));
  CHECK(never_run_together(three[0], three[2]));
  CHECK_FALSE(never_run_together(three[1], three[2]));
  // Unbound, or bound to several cores: the scheduler may run them at once.
  CHECK_FALSE(never_run_together(on("a", {0, 1}), on("a", {0, 1})));
  CHECK_FALSE(never_run_together(on("a", {0}), on("a", {0, 1})));
  CHECK_FALSE(never_run_together(on("a", {}), on("a", {0})));  // unknown affinity
  CHECK_FALSE(never_run_together(on("a", {0}), on("b", {0})));  // another node's core 0
}

TEST_CASE("a small receive's wait spins longer for every peer but one bound to this rank's own core", "[placement]") {
  // MeshImpl::wait spins kQuickAnswerPolls for a small message from a peer that may run while the waiter does
  // (!never_run_together), and yields at once for one that can only run once the waiter stops. 4 ranks on 2 cores,
  // bound two by two (mpirun --bind-to core:overload-allowed): 0 and 2 on core 0, 1 and 3 on core 1.
  std::vector<PeerInfo> four{on("a", {0}), on("a", {1}), on("a", {0}), on("a", {1})};
  CHECK_FALSE(never_run_together(four[0], four[1]));
  CHECK_FALSE(never_run_together(four[2], four[3]));
  CHECK(never_run_together(four[0], four[2]));
  CHECK(never_run_together(four[1], four[3]));
  // Unbound ranks (every core), unknown affinity, and another node's ranks may all run at once with this one.
  CHECK_FALSE(never_run_together(on("a", {0, 1}), on("a", {0, 1})));
  CHECK_FALSE(never_run_together(on("a", {}), on("a", {1})));
  CHECK_FALSE(never_run_together(on("a", {0}), on("b", {0})));
}

TEST_CASE("the scheduler may put two ranks on one core only where their allowed cores overlap", "[placement]") {
  // Bound to cores of their own (mpirun --bind-to core, 4 ranks on 2 cores: 0 and 1 apart): a quick spin that sees
  // no answer says nothing of where the peer is, and QuickSpins is not used for it.
  std::vector<PeerInfo> four{on("a", {0}), on("a", {1}), on("a", {0}), on("a", {1})};
  CHECK_FALSE(may_share_core(four[0], four[1]));
  CHECK(may_share_core(four[0], four[2]));
  CHECK(may_share_core(on("a", {0, 1}), on("a", {0, 1})));  // unbound
  CHECK(may_share_core(on("a", {0, 1}), on("a", {1})));
  CHECK(may_share_core(on("a", {}), on("a", {1})));  // unknown affinity
  CHECK_FALSE(may_share_core(on("a", {0, 1}), on("b", {0, 1})));  // another node
}

TEST_CASE("quick spins: a peer that answered within none of the last two yields at once, tried again now and then",
          "[placement]") {
  QuickSpins q;
  // A peer on another core: every spin sees its answer, and every receive spins.
  for (int i = 0; i < 100; ++i) {
    REQUIRE(q.spin_quick());
    q.saw(true);
  }
  // The scheduler puts it on this core: two spins in a row without the answer.
  REQUIRE(q.spin_quick());
  q.saw(false);
  REQUIRE(q.spin_quick());  // one miss could be a peer descheduled for a moment
  q.saw(false);
  // From now on the receives yield at once, but one in kRetryEvery spins again, and finds the peer still here.
  for (int round = 0; round < 3; ++round) {
    for (unsigned i = 1; i < QuickSpins::kRetryEvery; ++i) CHECK_FALSE(q.spin_quick());
    REQUIRE(q.spin_quick());
    q.saw(false);
  }
  // Moved back to a core of its own: the next try sees the answer, and every receive spins again.
  for (unsigned i = 1; i < QuickSpins::kRetryEvery; ++i) CHECK_FALSE(q.spin_quick());
  REQUIRE(q.spin_quick());
  q.saw(true);
  for (int i = 0; i < 20; ++i) CHECK(q.spin_quick());
}
