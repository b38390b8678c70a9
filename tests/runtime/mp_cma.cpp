// all_reduce, reduce and reduce_scatter [cma], all_reduce and reduce [shm_direct] in real processes (cross-memory attach only works
// between processes as it does here). Two modes:
//   mp_cma check: sizes at and around every threshold (the 256 KiB piece, slices of exactly one piece, odd
//     counts, counts not divisible by the world size, shm_direct's 4 MiB rounds and past its old 16 MiB cap;
//     MP_CMA_NO_ROUNDS set: up to the rounds only), in place and not,
//     four dtype/op pairs (premul_sum: the engine's copy path), every root;
//     each rank checks against the serial reference and the ranks compare digests. MP_CMA_DENY_RANK=r makes
//     rank r refuse cross-memory attach (DCOMM_SHM_CMA=0 in its environment only): the group must agree and
//     fall back on every rank, with the same results.
//     Then all_to_all, all_gather, gather, scatter and broadcast [cma], reduce[shm_pipe] and broadcast, all_gather, gather, scatter,
//     all_to_all and reduce_scatter [shm_direct] (shm_pipe.hpp) at counts around their 256 KiB pieces and past their
//     rings of slots, every root in turn, in place or not.
//   mp_cma kill [COLLECTIVE]: rank 1 is killed (SIGKILL from a thread of its own) while the group runs 16 MiB
//     all_reduce[cma] calls, mostly in the middle of single copies (or all_to_all[cma], all_gather[cma] or
//     gather[cma], scatter[cma], broadcast[cma] or reduce_scatter[cma] calls (all_gather_cma, gather_cma,
//     scatter_cma, broadcast_cma, reduce_scatter_cma), or
//     COLLECTIVE[shm_direct] calls: broadcast or all_gather, or reduce[shm_pipe], mostly mid pipe); every survivor
//     must print an error naming rank 1 and exit 3.
//   dcomm-run --nproc-per-node 3 -- mp_cma check|kill [COLLECTIVE]

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>

#include <dcomm/dcomm.hpp>

#include "collectives/registry.hpp"
#include "rendezvous/bootstrap.hpp"
#include "tests/collectives/cases.hpp"
#include "transports/peer_table.hpp"

using namespace dcomm;
using namespace dcomm::coll;

namespace {

std::vector<test::Case> threshold_cases(int size) {
  const auto p = static_cast<std::size_t>(size);
  const std::size_t piece = (std::size_t{256} << 10) / 4;  // float32 / int32 elements in one piece
  std::vector<test::Case> out;
  std::pair<DType, Reduction> kinds[] = {{DType::kFloat32, ReduceOp::kSum},
                                         {DType::kInt32, ReduceOp::kMax},
                                         {DType::kFloat64, ReduceOp::kAvg},
                                         {DType::kFloat32, Reduction(ReduceOp::kPreMulSum, 0.5)}};
  uint64_t salt = 7;
  const std::size_t round = (std::size_t{4} << 20) / 4;   // shm_direct's round (float32 elements)
  for (std::size_t count : {std::size_t{1}, std::size_t{5}, 3 * p + 1, piece - 1, piece, piece + 1, p * piece - 1,
                            p * piece, p * piece + 1, round - 1, round, round + 1, 4 * round + 3}) {
    // 4 rounds and a bit: just past the 16 MiB that shm_direct handled before it worked in rounds.
    if (count >= round - 1 && std::getenv("MP_CMA_NO_ROUNDS") != nullptr) continue;
    for (auto& [t, red] : kinds) {
      // The large counts once each, float32, in place or not and sum or premul_sum in turn: CI time.
      const bool large = count > 4 * piece;
      if (large && (t != DType::kFloat32 || (red.op == ReduceOp::kPreMulSum) != (salt % 2 == 0))) continue;
      for (bool in_place : {false, true}) {
        // The largest (non-temporal stores in shm_direct) both ways, the others one way.
        if (large && count < 4 * round && in_place != (count % 2 == 0)) continue;
        test::Case c;
        c.dtype = t;
        c.red = red;
        c.count = count;
        c.in_place = in_place;
        c.root = static_cast<int>(salt % p);
        c.salt = salt++;
        out.push_back(c);
      }
    }
  }
  return out;
}

// For the shm_direct pipes: counts around a piece and past a lane's ring (1 MiB with a lane per reader, 2 MiB with
// one), float32 and int8 (blocks that end mid-word), every root in turn, in place or not.
std::vector<test::Case> pipe_cases(int size) {
  const auto p = static_cast<std::size_t>(size);
  const std::size_t piece = (std::size_t{256} << 10) / 4;
  const bool no_rounds = std::getenv("MP_CMA_NO_ROUNDS") != nullptr;
  std::vector<test::Case> out;
  uint64_t salt = 70;
  for (std::size_t count : {std::size_t{1}, std::size_t{5}, 3 * p + 1, piece - 1, piece, piece + 1, 4 * piece + 3,
                            8 * piece + 5}) {
    if (count > 4 * piece && no_rounds) continue;
    for (DType t : {DType::kFloat32, DType::kInt8}) {
      test::Case c;
      c.dtype = t;
      c.count = count;
      c.in_place = salt % 2 == 0;
      c.root = static_cast<int>(salt % p);
      c.salt = salt++;
      out.push_back(c);
    }
  }
  return out;
}

int check() {
  if (const char* deny = std::getenv("MP_CMA_DENY_RANK")) {
    if (std::getenv("RANK") != nullptr && std::strcmp(std::getenv("RANK"), deny) == 0) setenv("DCOMM_SHM_CMA", "0", 1);
  }
  rdzv::Bootstrap boot = rdzv::bootstrap({});
  const Identity& id = boot.identity;
  transport::PeerInfo self = transport::local_peer_info(id.rank, id.local_rank, id.node_rank, id.host_id);
  transport::MeshOptions mopts;
  mopts.timeout = boot.timeout;
  GroupView view;
  view.mesh = transport::Mesh::create(make_prefix_store("mesh/", boot.store), self, id.world_size, mopts);
  view.rank = id.rank;
  view.size = id.world_size;
  view.world_ranks.resize(static_cast<std::size_t>(id.world_size));
  std::iota(view.world_ranks.begin(), view.world_ranks.end(), 0);
  auto engine = Engine::create(view);  // the default chunk: pieces of 256 KiB
  test::RankRecord rec;
  test::RankState s{*engine, view, rec};
  int ran = 0;
  for (auto [coll, name] : {std::pair{Collective::kAllReduce, "cma"}, std::pair{Collective::kReduce, "cma"},
                             std::pair{Collective::kReduceScatter, "cma"},
                             std::pair{Collective::kAllReduce, "shm_direct"},
                             std::pair{Collective::kReduce, "shm_direct"}}) {
    {
      const Algorithm* algo = find_algorithm(coll, name);
      if (algo == nullptr) {
        rec.failures.push_back(fmt::format("no {}[{}]", to_string(coll), name));
        continue;
      }
      for (const test::Case& c : threshold_cases(view.size)) {
        test::run_case(s, *algo, c);
        ++ran;
      }
    }
  }
  // all_to_all, all_gather, gather, scatter and broadcast [cma] and reduce[shm_pipe]: the pipes' counts (around a piece;
  // blocks that end mid-word), every root in turn, in place or not.
  for (auto [coll, name] : {std::pair{Collective::kAllToAll, "cma"}, std::pair{Collective::kAllGather, "cma"},
                            std::pair{Collective::kGather, "cma"}, std::pair{Collective::kScatter, "cma"},
                            std::pair{Collective::kBroadcast, "cma"}, std::pair{Collective::kReduce, "shm_pipe"}}) {
    const Algorithm* algo = find_algorithm(coll, name);
    if (algo == nullptr) {
      rec.failures.push_back(fmt::format("no {}[{}]", to_string(coll), name));
      continue;
    }
    for (const test::Case& c : pipe_cases(view.size)) {
      test::run_case(s, *algo, c);
      ++ran;
    }
  }
  for (Collective coll : {Collective::kBroadcast, Collective::kAllGather, Collective::kGather, Collective::kScatter,
                          Collective::kAllToAll, Collective::kReduceScatter}) {
    const Algorithm* algo = find_algorithm(coll, "shm_direct");
    if (algo == nullptr) {
      rec.failures.push_back(fmt::format("no {}[shm_direct]", to_string(coll)));
      continue;
    }
    for (const test::Case& c : pipe_cases(view.size)) {
      test::run_case(s, *algo, c);
      ++ran;
    }
  }
  uint64_t mine = test::digest(rec.digests.data(), rec.digests.size() * sizeof(uint64_t));
  boot.store->set(fmt::format("digest/{}", id.rank), std::to_string(mine));
  for (int r = 0; r < id.world_size; ++r) {
    if (boot.store->get_string(fmt::format("digest/{}", r)) != std::to_string(mine)) {
      rec.failures.push_back(fmt::format("results differ in bits from rank {}", r));
    }
  }
  boot.store->add("done", 1);
  while (boot.store->add("done", 0) < id.world_size) usleep(1000);
  std::printf("rank %d/%d: %d calls, %zu failures\n", id.rank, id.world_size, ran, rec.failures.size());
  for (std::size_t i = 0; i < rec.failures.size() && i < 10; ++i) std::printf("  %s\n", rec.failures[i].c_str());
  view.mesh->close();
  return rec.failures.empty() ? 0 : 1;
}

int kill(const std::string& what) {
  // "all_gather_cma", "gather_cma", "scatter_cma", "broadcast_cma": all_gather[cma], gather[cma] and scatter[cma] (root
  // 0 and each other rank copy parts of its block), broadcast[cma] (every rank reads or writes a slice), single
  // copies like all_to_all[cma].
  const bool single = what == "all_to_all" || what == "all_gather_cma" || what == "gather_cma" ||
                      what == "scatter_cma" || what == "broadcast_cma" || what == "reduce_scatter_cma";
  const std::string collective = single && what != "all_to_all" ? what.substr(0, what.size() - 4) : what;
  const std::string algo = single                   ? collective + ":cma"
                           : collective == "reduce" ? "reduce:shm_pipe"
                           : !collective.empty()    ? collective + ":shm_direct"
                                                    : "all_reduce:cma";
  setenv("DCOMM_ALGO", algo.c_str(), 1);
  auto pg = dcomm::init();
  std::vector<float> x(std::size_t{4} << 20);
  std::vector<float> all(pg->size() * x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(pg->rank() + 1) + static_cast<float>(i % 7);
  auto call = [&] {
    if (collective == "all_to_all") {
      const std::size_t n = x.size() / pg->size() * pg->size();  // P blocks
      pg->all_to_all(dcomm::Buffer(x.data(), n), dcomm::Buffer(all.data(), n));
    } else if (collective.empty()) {
      pg->all_reduce(dcomm::Buffer(x), dcomm::ReduceOp::kMax);
    } else if (collective == "reduce") {
      pg->reduce(dcomm::Buffer(x), dcomm::Buffer(all.data(), x.size()), 0, dcomm::ReduceOp::kMax);
    } else if (collective == "gather") {
      pg->gather(dcomm::Buffer(x), dcomm::Buffer(all), 0);
    } else if (collective == "scatter") {
      pg->scatter(dcomm::Buffer(all), dcomm::Buffer(x), 0);
    } else if (collective == "broadcast") {
      pg->broadcast(dcomm::Buffer(x), 0);
    } else if (collective == "reduce_scatter") {
      pg->reduce_scatter(dcomm::Buffer(all), dcomm::Buffer(x), dcomm::ReduceOp::kSum);
    } else {
      pg->all_gather(dcomm::Buffer(x), dcomm::Buffer(all));
    }
  };
  call();  // everyone is in and connected (and the windows exist)
  if (pg->rank() == 1) {
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      std::raise(SIGKILL);
    }).detach();
  }
  try {
    for (int i = 0; i < 100000; ++i) call();
  } catch (const dcomm::Error& e) {
    std::fprintf(stderr, "survivor rank %d: %s: %s\n", pg->rank(), dcomm::to_string(e.code()), e.what());
    return 3;
  }
  std::fprintf(stderr, "rank %d finished its calls without noticing the dead peer\n", pg->rank());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 2 && std::strcmp(argv[1], "check") == 0) return check();
    if (argc >= 2 && std::strcmp(argv[1], "kill") == 0) return kill(argc == 3 ? argv[2] : "");
    std::fprintf(stderr,
                 "usage: mp_cma check|kill [broadcast|all_gather|all_gather_cma|gather_cma|scatter_cma|broadcast_cma|"
                 "reduce_scatter_cma|all_to_all|reduce]\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mp_cma: %s\n", e.what());
    return 2;
  }
}
