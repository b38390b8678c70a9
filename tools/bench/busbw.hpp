#pragma once
// Algorithm and bus bandwidth, with nccl-tests' factors (/work/shared/ALGORITHMS.md): algbw = S / t, and
// busbw = algbw * factor, so that numbers compare across world sizes. S is Layout::bytes.

#include "tools/bench/coll.hpp"

#include <cstddef>

namespace dcomm::bench {

/// all_reduce 2(P-1)/P; reduce_scatter, all_gather, all_to_all, gather, scatter (P-1)/P; broadcast, reduce,
/// sendrecv 1; barrier 0 (it moves no data).
double bus_factor(Coll c, int world) noexcept;
/// S / t in GB/s (10^9 bytes per second); 0 when t is not positive.
double algbw_gbps(std::size_t bytes, double seconds) noexcept;
double busbw_gbps(Coll c, int world, std::size_t bytes, double seconds) noexcept;

}  // namespace dcomm::bench
