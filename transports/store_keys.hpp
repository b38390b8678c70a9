#pragma once
// Waits on per-rank store keys whose timeout errors name the ranks that did not write them (Mesh setup, shm).

#include <string>
#include <vector>

#include <dcomm/store.hpp>

#include "common/deadline.hpp"
#include "rendezvous/failure_record.hpp"

namespace dcomm::transport {

/// Waits until every rank has set `<key>/<rank>`; on timeout throws TimeoutError naming the missing ranks.
/// `what` starts the message ("mesh setup rank 0/4"), `step` says what they did not do ("publish their address").
/// With a `watch`, a rank recorded as failed (by dcomm-run, say) fails the wait at once, naming it.
void wait_for_ranks(Store& store, const std::string& key, int world_size, const Deadline& deadline,
                    const std::string& what, const std::string& step, const rdzv::FailureWatch& watch = {});
/// The same for some ranks only.
void wait_for_ranks(Store& store, const std::string& key, const std::vector<int>& ranks, const Deadline& deadline,
                    const std::string& what, const std::string& step, const rdzv::FailureWatch& watch = {});

std::string rank_key(const std::string& key, int rank);

}  // namespace dcomm::transport
