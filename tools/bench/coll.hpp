#pragma once
// The operations dcomm-bench measures: dcomm's nine collectives plus sendrecv, a point-to-point ping-pong.

#include <dcomm/process_group.hpp>

#include <string>

namespace dcomm::bench {

enum class Coll : uint8_t {
  kAllReduce, kBroadcast, kReduce, kScatter, kGather, kAllGather, kReduceScatter, kAllToAll, kBarrier, kSendRecv
};
inline constexpr Coll kAllColls[] = {Coll::kAllReduce, Coll::kBroadcast,     Coll::kReduce,   Coll::kScatter,
                                     Coll::kGather,    Coll::kAllGather,     Coll::kReduceScatter,
                                     Coll::kAllToAll,  Coll::kBarrier,       Coll::kSendRecv};

const char* to_string(Coll c) noexcept;  ///< "all_reduce", ..., "sendrecv"
bool parse_coll(const std::string& name, Coll* out) noexcept;
/// The dcomm collective behind c; false for sendrecv, which is point-to-point.
bool to_collective(Coll c, Collective* out) noexcept;
/// Whether c combines values with a reduction op (and so sweeps ops and checks them).
bool is_reducing(Coll c) noexcept;
/// Whether c has a root rank.
bool is_rooted(Coll c) noexcept;

}  // namespace dcomm::bench
