#pragma once
// Mesh setup's use of the store: a prefixed view for each transport's keys, and waits on per-rank keys whose
// timeout errors name the ranks that did not write them.

#include <memory>
#include <string>

#include <dcomm/store.hpp>

#include "common/deadline.hpp"

namespace dcomm::transport {

/// A view of `inner` whose keys all start with `prefix`.
std::unique_ptr<Store> prefixed_store(Store& inner, std::string prefix);

/// Waits until every rank has set `<key>/<rank>`; on timeout throws TimeoutError naming the missing ranks.
/// `what` starts the message ("mesh setup rank 0/4"), `step` says what they did not do ("publish their address").
void wait_for_ranks(Store& store, const std::string& key, int world_size, const Deadline& deadline,
                    const std::string& what, const std::string& step);

std::string rank_key(const std::string& key, int rank);

}  // namespace dcomm::transport
