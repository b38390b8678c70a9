#pragma once
// One rail's ring all-reduce of a slice (the middle phase of all_reduce[hier]), cut into three stages so that a
// pipelined caller can run its node phases while the rail's messages cross the link:
//   start()   posts the reduce pass's first round: the sends (this rank's part of the block before its own) and the
//             receives (the block before that); nothing waits.
//   reduce()  finishes the reduce pass (wait, reduce, forward, round after round), waits for its sends, then posts
//             the gather pass's first round: the sends of this rank's reduced block and the first receives.
//   finish()  finishes the gather pass (forwarding blocks on) and waits for every send; the slice is then reduced
//             over the rail on every member.
// Same messages, order and reduction order as ring_pass's reduce then gather passes (collectives/ring_pass.cpp),
// in chunk-sized pieces; on two nodes start() posts all of the reduce pass and reduce() all of the gather pass.
// Every rank calls the stages of its rings in one global order (the caller's), and each stage posts before it
// waits, so the stages of different rings and the node phases between them cannot wait on each other in a cycle.

#include <vector>

#include "collectives/context.hpp"
#include "collectives/patterns.hpp"

namespace dcomm::coll {

class RailRing {
 public:
  /// `rail`: the call on the rail's view (Context::on), with 2 steps of its own from its step base. `buf`: the
  /// slice (`count` elements), which must stay put until finish() returns.
  RailRing(Context rail, char* buf, std::size_t count);
  void start();
  void reduce();
  void finish();

 private:
  /// The block (index into blocks_) this rank receives in round `round` of a pass.
  const pattern::Block& incoming(bool reduce_pass, int round) const;
  void post_receives(bool reduce_pass, int round);
  void post_sends(const pattern::Block& b, uint32_t step);
  /// The rounds of a pass after its first was posted, then its sends.
  void complete_pass(bool reduce_pass);

  Context c_;
  char* buf_;
  std::vector<pattern::Block> blocks_;
  Scratch landing_[2];  // reduce pass: round r lands in landing_[r % 2]
  std::vector<transport::RequestPtr> sends_;
  std::vector<transport::RequestPtr> recvs_;  // the round in flight, piece by piece
};

}  // namespace dcomm::coll
