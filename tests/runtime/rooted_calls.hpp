#pragma once
// Rooted small calls through the shared-memory slots (collectives/slots.hpp), through the public API, so the same
// code runs as threads (unit) and as processes (mp, dcomm-run). The ranks coordinate through the group's store.
//   - check_rooted_eager: the side that only sends (reduce's and gather's non-roots, broadcast's and scatter's
//     root) returns before the ranks that read it have made the call; their results match the serial reference,
//     although every sender overwrote its input as soon as its call returned;
//   - check_rooted_flow: a slow side against senders that run ahead: a sender runs two calls ahead of a rank that
//     reads it without it, is never more than kCallsAhead calls ahead of it, and every result of every call is
//     right (no slot overwritten while read);
//   - check_rooted_mismatch: rooted calls that differ on one rank (after two common calls of the same shape, so
//     that the other ranks take theirs as a repeat): no rank returns data of another call; every rank
//     raises an InvalidUsageError naming the odd rank, in that call or (a rank that returned from it) in its next
//     call on the group; the call after that is right everywhere;
//   - check_rooted_mismatch_later: the same after more calls than the slots' ring holds, followed by rooted calls
//     alone: every rank that returned from the mismatched call raises the error naming the odd rank at one of the
//     next 60, though every later call agrees; results of calls that return are right; then in step.
// Every function appends one line per problem to `failures`.

#include <string>
#include <vector>

#include <dcomm/dcomm.hpp>

namespace dcomm::test {

void check_rooted_eager(ProcessGroup& pg, std::vector<std::string>& failures);
void check_rooted_flow(ProcessGroup& pg, std::vector<std::string>& failures);
void check_rooted_mismatch(ProcessGroup& pg, std::vector<std::string>& failures);
void check_rooted_mismatch_later(ProcessGroup& pg, std::vector<std::string>& failures);

}  // namespace dcomm::test
