#pragma once
// Message sizes: "4K"-style parsing, the geometric sweep, and how a sweep size maps onto each collective's
// buffers (nccl-tests' convention: the size is the data the algorithm bandwidth is computed from).

#include <dcomm/types.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "tools/bench/coll.hpp"

namespace dcomm::bench {

/// "64", "4K", "1.5M", "2G" (powers of 1024; a trailing "B" or "iB" is allowed). nullopt when malformed.
std::optional<std::size_t> parse_size(const std::string& text);

/// min, min*factor, ... up to and including max. A 0 minimum contributes one 0 and the sweep goes on from 1.
std::vector<std::size_t> sweep(std::size_t min_bytes, std::size_t max_bytes, std::size_t factor);

/// A sweep size laid out for one collective on `world` ranks, in elements of the dtype.
struct Layout {
  std::size_t send_count = 0;  ///< elements in each rank's send buffer (the root's, for scatter)
  std::size_t recv_count = 0;  ///< elements in each rank's receive buffer (the root's, for gather)
  std::size_t block = 0;       ///< per-rank block of the rank-partitioned collectives; else send_count
  std::size_t bytes = 0;       ///< S: the bytes algbw divides by the time, the size rounded down to fit
  std::size_t count = 0;       ///< bytes / dtype size: the "count" column
};

/// all_reduce, broadcast, reduce, sendrecv: one buffer of `bytes`. all_gather, gather: the gathered whole.
/// reduce_scatter, scatter: the whole that is split. all_to_all: each rank's send buffer. barrier: nothing.
/// Rank-partitioned sizes are rounded down to a multiple of world * dtype size.
Layout layout(Coll c, std::size_t bytes, DType dtype, int world);

}  // namespace dcomm::bench
