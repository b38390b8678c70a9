#pragma once
// The join protocol over a store: every process takes a join number, publishes its Member record under it, and
// reads everyone's records to complete its identity with the pure rule of member.hpp.
//
// Keys (under the caller's prefix): "rdzv/joined" (the join counter), "rdzv/member/<j>" (records), and
// "rdzv/failed" (bootstrap counts the processes whose join failed).

#include <dcomm/init.hpp>
#include <dcomm/store.hpp>

#include "rendezvous/failure_record.hpp"

#include <cstdint>
#include <string>

namespace dcomm::rdzv {

struct Joined {
  Identity identity;        // complete and validated
  uint64_t world_nonce = 0;  // the first member's nonce: the same on every process of this world
};

/// The join counter's key; bootstrap also reads it to know how many processes took part.
inline constexpr const char* kJoinedKey = "rdzv/joined";

/// Joins through store within timeout. `own_error`, when not empty, is this process's configuration error: it is
/// published so that every peer fails with it, then thrown here as InvalidUsageError. Throws TimeoutError naming
/// how many joined ("3/4 ranks joined after 30.0 s; rank(s) 2 never joined") when peers are missing. With a
/// `watch`, a rank recorded as failed (dcomm-run records a rank that died) fails the join at once, naming it.
Joined join_world(const Identity& declared, const std::string& own_error, Store& store, Duration timeout,
                  const FailureWatch& watch = {});

}  // namespace dcomm::rdzv
