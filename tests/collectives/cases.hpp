#pragma once
// One collective call per function, checked against the serial reference on the calling rank thread.

#include <cstdint>
#include <string>

#include "collectives/registry.hpp"
#include "tests/collectives/harness.hpp"
#include "tests/collectives/reference.hpp"

namespace dcomm::test {

struct Case {
  DType dtype = DType::kFloat32;
  Reduction red{};
  std::size_t count = 0;  ///< the vector (all_reduce, reduce, broadcast) or the per-rank block (the others)
  bool in_place = false;
  int root = 0;
  bool vector_variant = false;  ///< scatterv, gatherv, all_to_all_v (per-rank counts, gaps in the layout)
  uint64_t salt = 0;
};

std::string describe(const coll::Algorithm& algo, const Case& c, int size);

/// A rank's engine and its running sequence number.
struct RankState {
  coll::Engine& engine;
  const coll::GroupView& view;
  RankRecord& rec;
  uint64_t seq = 0;
};

/// Runs `c` with `algo` on this rank and records any mismatch (and, for results every rank shares, a digest).
void run_case(RankState& s, const coll::Algorithm& algo, const Case& c);

// Per collective, in cases_reducing.cpp and cases_moving.cpp.
void run_all_reduce(RankState& s, const coll::Algorithm& algo, const Case& c);
void run_reduce(RankState& s, const coll::Algorithm& algo, const Case& c);
void run_reduce_scatter(RankState& s, const coll::Algorithm& algo, const Case& c);
void run_broadcast(RankState& s, const coll::Algorithm& algo, const Case& c);
void run_scatter(RankState& s, const coll::Algorithm& algo, const Case& c);
void run_gather(RankState& s, const coll::Algorithm& algo, const Case& c);
void run_all_gather(RankState& s, const coll::Algorithm& algo, const Case& c);
void run_all_to_all(RankState& s, const coll::Algorithm& algo, const Case& c);

/// The blocks of a v-variant: counts[i] varies with i (zeros included) and the layout runs backwards with a
/// one-element gap between blocks, so packed-layout assumptions show up.
struct VLayout {
  std::vector<std::size_t> counts, displs;
  std::size_t extent = 0;
};
VLayout v_layout(std::size_t base, int size, int shift);

/// Runs the call and records a failure naming the case when it throws.
bool call(RankState& s, const coll::Algorithm& algo, const Case& c, const coll::Args& a);

}  // namespace dcomm::test
