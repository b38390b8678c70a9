// The stager Mesh::create uses unless its options bring one: CUDA's when this build has CUDA, else none.
#include "common/env.hpp"
#include "transports/staging/stager.hpp"
#include "transports/transport_config.h"

#if DCOMM_TRANSPORT_CUDA_IPC
#include "transports/cuda_ipc/cuda_stager.hpp"
#endif

namespace dcomm::transport::staging {

std::shared_ptr<Stager> default_stager() {
#if DCOMM_TRANSPORT_CUDA_IPC
  // One per process: its pinned chunks outlive any one group, since cudaHostAlloc costs milliseconds.
  static const std::shared_ptr<Stager> stager = cuda_ipc::make_cuda_stager(
      static_cast<std::size_t>(env::get_int("DCOMM_STAGING_CHUNK_BYTES",
                                            static_cast<long long>(cuda_ipc::kDefaultStagingChunkBytes))),
      static_cast<int>(env::get_int("DCOMM_STAGING_DEPTH", cuda_ipc::kDefaultStagingDepth)));
  return stager;
#else
  return nullptr;
#endif
}

}  // namespace dcomm::transport::staging
