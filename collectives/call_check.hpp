#pragma once
// Catching mismatched calls: before a collective moves data, every rank contributes a small descriptor of its
// call (collective, dtype, count, op, root, algorithm) to a dissemination agreement (⌈log₂P⌉ rounds of ~100
// bytes). Every rank learns the lowest rank whose descriptor differs from rank 0's and raises the same
// InvalidUsageError naming that rank and both values - instead of a hang or a wrong answer.
//
// An algorithm may carry its own data on those rounds (a CheckRider), so that a small call costs one exchange
// instead of a check and then an exchange. Every rank posts its receives with room for the largest rider, so the
// rounds match whatever each rank called; the data of a rank whose call differs is never used, since the check
// then throws on every rank.
//
// A rank whose own call is invalid (a null buffer, a root's send buffer too small, a count whose bytes overflow)
// does not throw alone: it joins the check with "invalid: <reason>", so every rank fails the same call naming it,
// and the call's number is used up on every rank alike - the next call pairs with the next call everywhere.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

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
  /// 1 where the call's elements are on a device: device calls pipeline in larger pieces (kDefaultDeviceChunkBytes),
  /// so a rank on host memory and one on device memory would cut the same call differently. 0 for v-variants
  /// (cut in host pieces whatever the memory) and calls of no elements.
  uint8_t device = 0;
  uint8_t reserved[7] = {};  ///< no padding: descriptors are compared with memcmp
};
static_assert(sizeof(CallDescriptor) == 56, "every byte of a descriptor is a field (compared with memcmp)");

/// `algorithm`: the name of the algorithm chosen (empty for a call that failed validation: it runs none).
CallDescriptor describe_call(const Args& args, const char* algorithm);
/// "all_reduce(dtype float32, count 1000, op sum, algorithm ring)".
std::string to_string(const CallDescriptor& d);

/// The most bytes a rider may add to one round.
inline constexpr std::size_t kMaxRideBytes = 4096;

/// Data riding on the check's rounds: in round k = 0..⌈log₂P⌉-1 rank r sends to r + 2^k and hears from r - 2^k.
class CheckRider {
 public:
  virtual ~CheckRider() = default;
  /// Round k's data, at most kMaxRideBytes; it must stay valid until arrived(k, ...) is called.
  virtual std::span<const char> outgoing(int round) = 0;
  /// What rank r - 2^k sent in round k. Its size differs from the expected only when the calls differ (the
  /// check then throws after the last round) or checks are off.
  virtual void arrived(int round, std::span<const char> data) = 0;
};

/// The most bytes of an invalid call's reason that travel with the check (longer ones are cut).
inline constexpr std::size_t kMaxReasonBytes = 240;

/// Collective over the group; throws InvalidUsageError on every rank when any rank's call is invalid (naming the
/// lowest such rank and its reason) or any rank's descriptor differs. `invalid` non-empty: why this rank's call
/// cannot run (a caller mistake found locally, call_problem()); this rank then takes part only to tell the others,
/// and must not pass a rider. `mine` null: checks are off and the rounds carry only the rider's data.
/// With shared-memory slots on the group (slots.hpp) and no rider, the check is one slot exchange.
void check_calls_match(const Context& c, const CallDescriptor* mine, CheckRider* rider = nullptr,
                       std::string_view invalid = {});

/// The check's errors, which every rank throws alike once it knows every rank's call: rank `rank`'s call is
/// invalid for `reason`; rank `bad`'s call differs from rank `low`'s.
[[noreturn]] void throw_invalid_call(const Context& c, int rank, std::string_view reason);
[[noreturn]] void throw_mismatched_calls(const Context& c, int bad, const CallDescriptor& bad_call, int low,
                                         const CallDescriptor& low_call);

}  // namespace dcomm::coll
