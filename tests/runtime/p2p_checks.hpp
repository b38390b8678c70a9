#pragma once
// Point-to-point through the public API, so the same code runs as threads (unit, loopback) and as processes (mp,
// dcomm-run over shm, where small sends are handed over on the spot: Mesh::send_now).
//   - check_p2p_sizes_in_order: every rank isends to the next rank sizes from 0 to past the shm eager limit on one
//     tag, scribbles over each send buffer the moment its handle says it completed, then receives from the previous
//     rank: every message arrives whole and in the order sent, with its size and source on the handle;
//   - check_p2p_ping_pong: blocking sends and receives around the ring, a value that changes every round from one
//     reused buffer (a send's buffer is the caller's again when send returns).
// Every function appends one line per problem to `failures`.

#include <string>
#include <vector>

#include <dcomm/dcomm.hpp>

namespace dcomm::test {

void check_p2p_sizes_in_order(ProcessGroup& pg, std::vector<std::string>& failures);
void check_p2p_ping_pong(ProcessGroup& pg, std::vector<std::string>& failures);

}  // namespace dcomm::test
