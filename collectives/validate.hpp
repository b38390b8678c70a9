#pragma once
// Rejecting caller mistakes before any I/O: everything a rank can check about its own call.

#include "collectives/engine.hpp"

namespace dcomm::coll {

/// Throws InvalidUsageError naming the collective, the rank and the argument.
void validate_call(const Args& args, const GroupView& view);

/// Whether the collective combines values (all_reduce, reduce, reduce_scatter).
bool is_reducing(Collective c);
/// Whether the call moves no data on any rank (count 0 in a regular collective other than barrier); every
/// rank agrees once the call check has passed.
bool moves_nothing(const Args& args);

}  // namespace dcomm::coll
