#pragma once
// Resolving a process's identity from options and launcher environments, before any I/O. resolve_identity()
// (public, in <dcomm/init.hpp>) is resolve_partial_identity() followed by a range check that throws.

#include <dcomm/init.hpp>

#include <optional>
#include <string>

namespace dcomm::rdzv {

/// Where each field of an Identity came from, for messages: "InitOptions::rank", "RANK=3", "" when unset.
struct IdentityOrigins {
  std::string rank, world_size, local_rank, local_world_size, node_rank, node_count;
};

/// Fills what options and the first launcher family present in the environment give (dcomm-run, torchrun,
/// mpirun, Slurm, in that order); fields nobody gives stay -1. Throws InvalidUsageError on a variable that is
/// not an integer. Does not check ranges.
Identity resolve_partial_identity(const InitOptions& options, IdentityOrigins* origins);

/// The first out-of-range or contradictory value, described with its origin, or nullopt when all is well.
std::optional<std::string> range_error(const Identity& id, const IdentityOrigins& origins);

/// DCOMM_HOST_ID, else "<hostname>:<network namespace inode>", so that two network namespaces (containers) on
/// one machine count as two nodes.
std::string default_host_id();

}  // namespace dcomm::rdzv
