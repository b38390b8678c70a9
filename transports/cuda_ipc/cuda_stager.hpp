#pragma once
// The CUDA stager (transports/staging/stager.hpp): how StagedTransport moves device buffers over host-only
// transports. Pinned chunks come from cudaHostAlloc, pooled per device and kept for reuse (cudaHostAlloc costs
// milliseconds); copies run on two non-blocking streams per device, one per direction, so a rank that sends and
// receives at once keeps both copy engines busy; each slot's event says when its copy finished.
//
// DCOMM_STAGING_CHUNK_BYTES (default 4 MiB) and DCOMM_STAGING_DEPTH (slots per message, default 4) tune it.

#include <cstddef>
#include <memory>

#include "transports/staging/stager.hpp"

namespace dcomm::transport::cuda_ipc {

inline constexpr std::size_t kDefaultStagingChunkBytes = std::size_t{4} << 20;
inline constexpr int kDefaultStagingDepth = 4;

/// A stager with the given chunk size and depth. Touches CUDA only when the first slot is asked for.
std::shared_ptr<staging::Stager> make_cuda_stager(std::size_t chunk_bytes, int depth);

}  // namespace dcomm::transport::cuda_ipc
