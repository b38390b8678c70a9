#pragma once
// The dcomm group under each torch group. torch creates a backend object per group on its members only; the
// first dcomm group of a set of ranks is a dcomm world of its own (rendezvous, mesh, transports), and every later
// torch group whose ranks lie inside such a world becomes a subgroup of it: the same connections and shared
// memory, a tag space of its own.

#include <chrono>
#include <dcomm/process_group.hpp>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

namespace dcomm_torch {

/// The dcomm group for a torch group: `global_ranks` are its members' ranks in torch's default group, in group
/// rank order (empty for the default group itself: all `size` ranks); `store` is torch's store for this group.
dcomm::ProcessGroupPtr join_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                  std::chrono::milliseconds timeout, std::vector<int> global_ranks,
                                  const std::string& name);

}  // namespace dcomm_torch
