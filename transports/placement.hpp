#pragma once
// Whether this rank shares its cores with other ranks of its node: decides how long a wait may spin
// (common/deadline.hpp). Computed from the affinity every rank publishes in its PeerInfo, not guessed from counts:
// two ranks bound one to a core (mpirun --bind-to core) each own their core although each sees only one.

#include <vector>

#include "transports/transport.hpp"

namespace dcomm::transport {

/// True when the ranks on self's node whose cores overlap self's outnumber the cores they may run on together.
/// A rank with no affinity recorded counts as able to run on every core of its node's other ranks.
bool shares_cores(const std::vector<PeerInfo>& peers, int self);
/// True when no other rank of self's node may run on any of self's cores (each bound to cores of its own, as
/// mpirun --bind-to core does): then no peer can be waiting for self's core, whatever a slow yield says.
bool cores_alone(const std::vector<PeerInfo>& peers, int self);
/// True when `a` and `b` can never run at the same time: both bound to the same single core. Ranks of a node that
/// runs more ranks than cores often do run at once, so that alone does not make a pair one (shm's streams).
bool never_run_together(const PeerInfo& a, const PeerInfo& b);
/// True when the scheduler may put `a` and `b` on one core: same node, and their allowed cores overlap (unknown
/// affinity overlaps everything). Ranks bound to cores of their own never are (mpirun --bind-to core).
bool may_share_core(const PeerInfo& a, const PeerInfo& b);

}  // namespace dcomm::transport
