#pragma once
// What one node's supervisor needs from the other nodes' launchers during a round. On one node there is no link
// (the supervisor gets nullptr); across nodes it is the store (see node_rendezvous.hpp). Every call may throw a
// dcomm::Error when the store is unreachable: the supervisor then stops its ranks and reports the store as lost.

#include <optional>

#include "tools/run/summary.hpp"

namespace dcomm::run {

class NodeLink {
 public:
  virtual ~NodeLink() = default;
  /// The round's first failure on any node, if one was reported. Cheap enough to call every ~100 ms.
  virtual std::optional<RankExit> first_failure(int round) = 0;
  /// Reports a failure on this node; returns the round's first failure, which is another node's when that
  /// node reported first.
  virtual RankExit report_failure(int round, const RankExit& failure) = 0;
  /// Reports that every rank of this node succeeded this round.
  virtual void report_success(int round) = 0;
  /// Whether every node reported success this round.
  virtual bool all_succeeded(int round) = 0;
};

}  // namespace dcomm::run
