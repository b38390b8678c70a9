#pragma once
// OpenMPI as the peer library of --vs mpi: the same cases, on the same ranks, in the same run.
// Compiled only when MPI is found (DCOMM_HAVE_MPI).

#include <dcomm/process_group.hpp>

#include <memory>

#include "tools/bench/library.hpp"

namespace dcomm::bench {

/// Joins MPI on pg's ranks (see mpi_boot.hpp) and returns it as a Library. Throws BenchFailure when MPI cannot
/// be joined here, with the line that says what to do instead.
std::unique_ptr<Library> make_mpi_library(ProcessGroupPtr pg, double timeout_s);

}  // namespace dcomm::bench
