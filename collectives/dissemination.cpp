#include "collectives/dissemination.hpp"

#include "collectives/patterns.hpp"

namespace dcomm::coll {

void dissemination_merge(const Context& c, uint32_t step_base, std::vector<uint8_t>& state, const MergeFn& merge) {
  const int p = c.size();
  std::vector<uint8_t> theirs(state.size());
  for (int k = 0; k < pattern::ceil_log2(p); ++k) {
    // Send a copy: merging into `state` must not race with the send of it.
    std::vector<uint8_t> out = state;
    c.sendrecv(pattern::dissemination_to(c.rank(), p, k), out.data(), out.size(),
               pattern::dissemination_from(c.rank(), p, k), theirs.data(), theirs.size(),
               step_base + static_cast<uint32_t>(k));
    merge(state, theirs);
  }
}

}  // namespace dcomm::coll
