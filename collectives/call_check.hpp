#pragma once
// Catching mismatched calls: before a collective moves data, every rank contributes a small descriptor of its
// call (collective, dtype, count, op, root, algorithm) to a dissemination agreement (⌈log₂P⌉ rounds of ~80
// bytes). Every rank learns the lowest rank whose descriptor differs from rank 0's and raises the same
// InvalidUsageError naming that rank and both values - instead of a hang or a wrong answer.

#include <cstdint>
#include <string>

#include "collectives/engine.hpp"
#include "collectives/registry.hpp"

namespace dcomm::coll {

/// What ranks must agree on. Fields that legitimately differ per rank (a v-variant's counts) are left zero.
struct CallDescriptor {
  uint8_t collective = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t vector_variant = 0;
  int32_t root = 0;
  uint64_t count = 0;
  char algorithm[32] = {};
};

CallDescriptor describe_call(const Args& args, const Algorithm& algorithm);
/// "all_reduce(dtype float32, count 1000, op sum, algorithm ring)".
std::string to_string(const CallDescriptor& d);

/// Collective over the group; throws InvalidUsageError on every rank when any rank's descriptor differs.
void check_calls_match(const Context& c, const CallDescriptor& mine);

}  // namespace dcomm::coll
