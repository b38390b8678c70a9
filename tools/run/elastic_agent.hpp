#pragma once
// dcomm-run as one agent of an elastic job (--nnodes MIN:MAX), as torchrun's elastic agent: host the store if this
// agent can (the first to bind --rdzv-endpoint / --master-addr:--master-port; the others connect to it), join a
// rendezvous round (elastic_rendezvous.hpp), run this node's ranks with the round's node rank and world size,
// and rendezvous again when the round ends early: a failure (a rank's, or a lost agent's; counted against
// --max-restarts) or an agent waiting to join while there is room below MAX (counted against nothing).

#include "tools/run/options.hpp"
#include "tools/run/signals.hpp"

namespace dcomm::run {

/// Runs the whole elastic job on this node; returns dcomm-run's exit code (summary.hpp).
int run_elastic(const LaunchOptions& options, SignalWatcher& signals);

}  // namespace dcomm::run
