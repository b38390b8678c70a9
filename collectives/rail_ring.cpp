#include "collectives/rail_ring.hpp"

#include <algorithm>

namespace dcomm::coll {

using pattern::Block;

namespace {

constexpr uint32_t kReduceStep = 0;
constexpr uint32_t kGatherStep = 1;

}  // namespace

RailRing::RailRing(Context rail, char* buf, std::size_t count)
    : c_(std::move(rail)), buf_(buf), blocks_(pattern::even_blocks(count, c_.size())) {}

const Block& RailRing::incoming(bool reduce_pass, int round) const {
  // The reduce pass lags one block behind the gather pass: it ends with this rank's own block reduced, which the
  // gather pass then sends first.
  const int lag = reduce_pass ? 2 : 1;
  return blocks_[static_cast<std::size_t>(pattern::mod(c_.rank() - round - lag, c_.size()))];
}

void RailRing::post_sends(const Block& b, uint32_t step) {
  const int next = pattern::ring_next(c_.rank(), c_.size());
  for (const Block& pc : pattern::pieces(b, c_.chunk_elems())) {
    if (pc.count > 0) sends_.push_back(c_.isend(next, step, c_.at(buf_, pc.offset), pc.count * c_.esize()));
  }
}

void RailRing::post_receives(bool reduce_pass, int round) {
  const int prev = pattern::ring_prev(c_.rank(), c_.size());
  const Block& in = incoming(reduce_pass, round);
  recvs_.clear();
  for (const Block& pc : pattern::pieces(in, c_.chunk_elems())) {
    if (pc.count == 0) continue;
    char* at = reduce_pass ? c_.at(landing_[round % 2].data(), pc.offset - in.offset) : c_.at(buf_, pc.offset);
    recvs_.push_back(c_.irecv(prev, reduce_pass ? kReduceStep : kGatherStep, at, pc.count * c_.esize()));
  }
}

void RailRing::start() {
  if (c_.size() == 1) return;
  std::size_t largest = 0;
  for (const Block& b : blocks_) largest = std::max(largest, b.count);
  landing_[0] = c_.scratch(largest);
  if (c_.size() > 2) landing_[1] = c_.scratch(largest);
  post_sends(blocks_[static_cast<std::size_t>(pattern::mod(c_.rank() - 1, c_.size()))], kReduceStep);
  post_receives(true, 0);
}

void RailRing::complete_pass(bool reduce_pass) {
  const int p = c_.size();
  for (int s = 0; s + 1 < p; ++s) {
    if (s > 0) post_receives(reduce_pass, s);
    const Block& in = incoming(reduce_pass, s);
    std::size_t i = 0;
    // Each piece is reduced, and forwarded, as soon as it is in: what pipelines the ring within a pass.
    for (const Block& pc : pattern::pieces(in, c_.chunk_elems())) {
      if (pc.count == 0) continue;
      c_.wait(recvs_[i++]);
      if (reduce_pass)
        c_.reduce(c_.at(buf_, pc.offset), c_.at(landing_[s % 2].data(), pc.offset - in.offset), pc.count);
      if (s + 2 < p) post_sends(pc, reduce_pass ? kReduceStep : kGatherStep);
    }
  }
  // The gather pass lands in blocks the reduce pass's sends read from; and finish() hands the buffer back.
  c_.wait_all(sends_);
  sends_.clear();
}

void RailRing::reduce() {
  if (c_.size() == 1) return;
  complete_pass(true);
  landing_[0] = Scratch();
  landing_[1] = Scratch();
  post_sends(blocks_[static_cast<std::size_t>(c_.rank())], kGatherStep);
  post_receives(false, 0);
}

void RailRing::finish() {
  if (c_.size() > 1) complete_pass(false);
}

}  // namespace dcomm::coll
