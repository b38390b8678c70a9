#pragma once
// Whether this build can run collectives on device memory: it needs the CUDA reductions of collectives/cuda/,
// built with DCOMM_HAVE_CUDA. Without them, device buffers are rejected before any I/O.

#include <dcomm/types.hpp>

#include "dcomm_config.h"

#define DCOMM_CUDA_REDUCE DCOMM_HAVE_CUDA

namespace dcomm::coll {

inline bool device_supported(const Device& d) { return d.is_host() || DCOMM_CUDA_REDUCE; }

}  // namespace dcomm::coll
