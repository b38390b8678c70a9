#pragma once
// Whether this build can run collectives on device memory: it needs the CUDA reductions of collectives/cuda/
// (DCOMM_HAVE_CUDA and that folder). Without them, device buffers are rejected before any I/O.

#include <dcomm/types.hpp>

#include "dcomm_config.h"

#if DCOMM_HAVE_CUDA && __has_include("collectives/cuda/reduce_cuda.hpp")
#define DCOMM_CUDA_REDUCE 1
#else
#define DCOMM_CUDA_REDUCE 0
#endif

namespace dcomm::coll {

inline bool device_supported(const Device& d) { return d.is_host() || DCOMM_CUDA_REDUCE; }

}  // namespace dcomm::coll
