#pragma once
// A reducing collective (all_reduce, reduce, reduce_scatter) around its algorithm: the engine's part. The algorithm
// combines in a work buffer that starts as this rank's input (pre-multiplied for premul_sum); avg divides the
// result by the group size at the end; reduce_scatter copies this rank's block out of the work buffer.

#include <cstddef>

#include "collectives/context.hpp"
#include "collectives/registry.hpp"

namespace dcomm::coll {

/// Whether a reducing call combines in scratch, its output unable to serve (reduce off the root, reduce_scatter).
bool needs_work_scratch(const Args& a, int rank);

/// Runs reducing `algo` for `c`'s call: `scratch` is the work buffer where needs_work_scratch() says one is needed
/// (else null: the output serves), and the input is prepared into it, or left where it is for an algorithm that
/// takes its input itself (Algorithm::takes_input).
void run_reducing(Context& c, const Algorithm& algo, char* scratch);

}  // namespace dcomm::coll
