#pragma once
// How dcomm's 44-bit transport tag and the sender's rank share UCX's 64-bit tag:
//   [ source rank : 20 ][ dcomm tag : 44 ]
// The receiver learns the sender from the tag alone, so one wildcard probe can discover messages from every peer
// in arrival order, which is what lets the matching engine above do any-source receives across transports.

#include <cstdint>

#include "transports/transport.hpp"

namespace dcomm::transport::ucx {

inline constexpr int kSourceBits = 64 - kTagBits;
/// The all-ones source is reserved for wire-up hellos (ucx_wireup.cpp), so ranks are 0 .. 2^20 - 2.
inline constexpr int kWireupSource = (1 << kSourceBits) - 1;
/// Ranks must fit the source field, short of the reserved value.
inline constexpr int kMaxWorldSize = kWireupSource;
inline constexpr uint64_t kFullTagMask = ~uint64_t{0};

inline uint64_t pack_tag(int source, uint64_t tag) { return (static_cast<uint64_t>(source) << kTagBits) | tag; }
inline int tag_source(uint64_t ucx_tag) { return static_cast<int>(ucx_tag >> kTagBits); }
/// The hello that `rank` sends each peer at connect: reserved source, the sender's rank as the tag.
inline uint64_t wireup_tag(int rank) { return pack_tag(kWireupSource, static_cast<uint64_t>(rank)); }
inline uint64_t tag_value(uint64_t ucx_tag) { return ucx_tag & kMaxTag; }

}  // namespace dcomm::transport::ucx
