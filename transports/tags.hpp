#pragma once
// How a 44-bit transport tag is laid out, so point-to-point traffic and every collective of every group keep
// apart:   [ staged : 1 ][ context : 11 ][ kind : 1 ][ payload : 31 ]
//   staged:  set only by StagedTransport (transports/staging) on the header and chunks of a device buffer it
//            stages through host memory; tags given to the Mesh leave it clear (at most kMaxMeshTag);
//   context: the group's tag space (the world is 0; each split / new_group takes the next);
//   kind 0:  point-to-point, payload = the user's tag (0 .. 2^31-1);
//   kind 1:  a collective, payload = [ seq : 20 ][ step : 11 ] (seq numbers the group's collectives; step lets an
//            algorithm tell its own messages apart where per-(source, tag) ordering is not enough).

#include <cstdint>

#include "transports/transport.hpp"

namespace dcomm::transport {

inline constexpr uint32_t kMaxContexts = 1u << 11;
inline constexpr uint64_t kMaxUserTag = (uint64_t{1} << 31) - 1;
inline constexpr uint32_t kMaxCollectiveSteps = 1u << 11;

inline uint64_t p2p_tag(uint32_t context, uint64_t user_tag) {
  return (uint64_t{context} << 32) | (user_tag & kMaxUserTag);
}

inline uint64_t collective_tag(uint32_t context, uint64_t seq, uint32_t step) {
  return (uint64_t{context} << 32) | (uint64_t{1} << 31) | ((seq & 0xFFFFFu) << 11) | (step & (kMaxCollectiveSteps - 1));
}

static_assert(kMaxMeshTag >> 32 == kMaxContexts - 1, "tag layout must fill the mesh's tag bits");
static_assert((kStagedBit | kMaxMeshTag) == kMaxTag, "the staged bit is the top transport tag bit");

}  // namespace dcomm::transport
