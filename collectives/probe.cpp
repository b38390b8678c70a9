// Fitting the cost model at Engine::create. The probe is collective over the group and short (a few ms): a warm-up
// exchange with the ring neighbours, 6 rounds of 8-byte messages (α: the fastest round), 6 rounds of 128 KiB
// (1 MiB on a group that spans nodes) (β: the fastest round's extra time per byte; with 2, three ranks on two cores
// measured β 20x too high, every round having waited for a core), and a timed reduction of 2 MiB of float32 (γ). The
// ranks then agree on the maximum of each, so that every rank's cost model - and therefore every rank's choice of
// algorithm - is the same.

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "collectives/cost_model.hpp"
#include "collectives/dissemination.hpp"
#include "collectives/reduce.hpp"
#include "collectives/shm_segments.hpp"
#include "collectives/topology.hpp"
#include "common/env.hpp"
#include "common/log.hpp"

namespace dcomm::coll {

namespace {

// The probe's messages use the last sequence number of the group's tag space: the group's own collectives
// start at 0 and the probe is over before the first of them starts.
constexpr uint64_t kProbeSeq = 0xFFFFF;
constexpr std::size_t kLarge = 128 * 1024;
// Between nodes: a link's buffers (a switch's, a token bucket's) pass 128 KiB at memory speed, so the probe saw
// the links in front of the wire (2 namespaces shaped to 1 Gbit/s: β between nodes as fast as within, and the
// choice between hier and rabenseifner flipped from run to run). 1 MiB is past them, and costs 6 x 8 ms at 1 Gbit/s.
constexpr std::size_t kLargeAcross = 1024 * 1024;
constexpr int kSmallRounds = 6;
constexpr int kLargeRounds = 6;
constexpr std::size_t kGammaBytes = std::size_t{2} << 20;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Reductions of vectors larger than the caches run at memory speed, shared with the other ranks of the node (which
// probe at the same moment): a 2 MiB reduction measures that, where an in-cache one would flatter γ.
double measure_gamma() {
  std::vector<float> a(kGammaBytes / sizeof(float), 1.0f), b(kGammaBytes / sizeof(float), 0.5f);
  double best = 0;
  for (int i = 0; i < 2; ++i) {
    auto t0 = Clock::now();
    reduce_into(a.data(), b.data(), a.size(), DType::kFloat32, ReduceOp::kSum, Device::host());
    double t = seconds_since(t0);
    best = i == 0 ? t : std::min(best, t);
  }
  return std::max(best / static_cast<double>(kGammaBytes), 1e-13);
}

// One round: send to the next rank and receive from the previous one, as every rank does at once. The fastest
// round is the one least disturbed by other work on the machine.
double exchange_rounds(const Context& c, uint32_t step, std::vector<char>& out, std::vector<char>& in, int rounds) {
  int next = pattern::ring_next(c.rank(), c.size());
  int prev = pattern::ring_prev(c.rank(), c.size());
  double best = 0;
  for (int i = 0; i < rounds; ++i) {
    auto t0 = Clock::now();
    c.sendrecv(next, out.data(), out.size(), prev, in.data(), in.size(), step);
    double t = seconds_since(t0);
    best = i == 0 ? t : std::min(best, t);
  }
  return best;
}

// `step` numbers the probe's first message; it uses three.
void measure_links(const Context& c, CostParams* p, uint32_t step, std::size_t large = kLarge) {
  std::vector<char> small_out(8, 1), small_in(8), large_out(large, 1), large_in(large);
  exchange_rounds(c, step, small_out, small_in, 1);
  double t_small = exchange_rounds(c, step + 1, small_out, small_in, kSmallRounds);
  double t_large = exchange_rounds(c, step + 2, large_out, large_in, kLargeRounds);
  p->alpha = std::max(t_small, 1e-8);
  p->beta = std::max((t_large - t_small) / static_cast<double>(large), 1e-13);
}

}  // namespace

CostParams fit_cost_model(const GroupView& view, std::size_t chunk_bytes, std::string* source) {
  CostParams p;
  p.chunk_bytes = static_cast<double>(chunk_bytes);
  Args none;
  none.coll = Collective::kBarrier;
  Deadline deadline = Deadline::after(std::chrono::seconds(60));
  const std::string what = fmt::format("collectives engine probe rank {}/{}", view.rank, view.size);
  Context c(none, view, deadline, kProbeSeq, what, chunk_bytes);
  // A group that spans nodes has two link classes: the whole group's ring (its slowest link: between nodes)
  // prices the flat algorithms and the hierarchical ones' steps between nodes; a ring within each node, every
  // node at once, prices their node-local steps. A group on one node probes as it always did.
  const Hierarchy* h = view.hierarchy.get();
  const bool two_classes = h != nullptr && h->topo.node_count() > 1 && h->topo.max_local > 1;
  double intra[2] = {0, 0};  // 0: not measured on this rank (a node of one)
  const auto file = env::get("DCOMM_TUNING_FILE");
  const bool from_file = file && !file->empty();
  if (from_file) {
    p = load_tuning_file(*file, p);
    intra[0] = p.alpha_intra, intra[1] = p.beta_intra;
    *source = "tuning file " + *file;
  } else {
    p.gamma = measure_gamma();
    const bool spans = h != nullptr && h->topo.node_count() > 1;
    if (view.size > 1) measure_links(c, &p, 0, spans ? kLargeAcross : kLarge);
    if (two_classes && h->node_view.size > 1) {
      CostParams local;
      measure_links(c.on(h->node_view, 0), &local, 3);
      intra[0] = local.alpha, intra[1] = local.beta;
    }
    *source = view.size > 1 ? (two_classes ? "link probe at group creation, between and within nodes"
                                           : "link probe at group creation")
                            : "defaults and a local reduction probe";
  }
  // Agree on the maximum of each parameter (an idempotent merge, as dissemination needs).
  struct Params {
    double v[5];
  };
  Params all = agree(c, 6, Params{{p.alpha, p.beta, p.gamma, intra[0], intra[1]}}, [](Params& m, const Params& t) {
    for (int i = 0; i < 5; ++i) m.v[i] = std::max(m.v[i], t.v[i]);
  });
  p.alpha = all.v[0], p.beta = all.v[1], p.gamma = all.v[2];
  // Where no node has two ranks (or one node is the whole group), the one link class serves for both.
  const bool measured = all.v[3] > 0;
  p.alpha_intra = measured ? all.v[3] : p.alpha;
  p.beta_intra = measured ? all.v[4] : p.beta;
  if (!from_file) {
    DCOMM_DEBUG("collectives engine rank {}/{}: link probe measured alpha {:.3f} us, beta {:.4f} ns/B, gamma {:.4f} ns/B",
                view.rank, view.size, p.alpha * 1e6, p.beta * 1e9, p.gamma * 1e9);
    p = stabilize(p, group_on_one_host(view), source);
  }
  return p;
}

CostParams stabilize(CostParams p, bool one_node, std::string* source) {
  int snapped = 0;
  auto stable = [&](double probed, double built_in) {
    if (one_node && probed >= built_in / kStableBand && probed <= built_in * kStableBand) {
      ++snapped;
      return built_in;
    }
    return probed > 0 ? std::exp2(std::round(std::log2(probed))) : probed;
  };
  p.alpha = stable(p.alpha, kOneNodeAlpha);
  p.beta = stable(p.beta, kOneNodeBeta);
  p.gamma = stable(p.gamma, kOneNodeGamma);
  // Links within a node are one node's links wherever the group spans: always against the one-node values.
  one_node = true;
  const int before = snapped;
  p.alpha_intra = stable(p.alpha_intra, kOneNodeAlpha);
  p.beta_intra = stable(p.beta_intra, kOneNodeBeta);
  snapped = before;
  if (source != nullptr) {
    *source += snapped == 3   ? ", taken as the built-in one-node values"
               : snapped == 0 ? ", rounded to powers of two"
                              : ", the ones near the built-in one-node values taken as those, the others rounded to "
                                "powers of two";
  }
  return p;
}

}  // namespace dcomm::coll
