// init(): rendezvous (identity and store), then the world's mesh, then the world group.

#include <numeric>

#include <dcomm/dcomm.hpp>

#include "common/deadline.hpp"
#include "common/log.hpp"
#include "rendezvous/bootstrap.hpp"
#include "runtime/process_group_impl.hpp"
#include "transports/peer_table.hpp"
#include "transports/placement.hpp"

namespace dcomm {

namespace {

// Ranks that share cores yield almost at once when a wait is not answered; ranks that own theirs spin
// (common/deadline.hpp). Decided from every local rank's affinity, so two ranks bound one to a core spin.
void set_wait_policy(const transport::Mesh& mesh, const Identity& id) {
  std::vector<transport::PeerInfo> peers;
  for (int r = 0; r < id.world_size; ++r) peers.push_back(mesh.peer(r));
  const bool shared = transport::shares_cores(peers, id.rank);
  const bool alone = !shared && transport::cores_alone(peers, id.rank);
  Backoff::set_oversubscribed(shared);
  Backoff::set_cores_alone(alone);
  DCOMM_DEBUG("{} ranks on this node, {} core(s) for this one: waits {}", id.local_world_size,
              peers[static_cast<std::size_t>(id.rank)].cpus.size(),
              shared  ? "spin only briefly before yielding (cores shared)"
              : alone ? "spin (cores bound to this rank alone: a slow yield is never a peer's turn)"
                      : "spin (cores owned; briefly after a yield that let something else run)");
}

}  // namespace

std::shared_ptr<ProcessGroup> init(const InitOptions& options) {
  rdzv::Bootstrap boot = rdzv::bootstrap(options);
  const Identity& id = boot.identity;
  log::set_rank(id.rank, id.world_size);
  DCOMM_INFO("joined as rank {}/{} (local {}/{}, node {}/{}, from {})", id.rank, id.world_size, id.local_rank,
             id.local_world_size, id.node_rank, id.node_count, id.source);

  transport::PeerInfo self = transport::local_peer_info(id.rank, id.local_rank, id.node_rank, id.host_id);

  transport::MeshOptions mesh_options;
  mesh_options.timeout = boot.timeout;
  mesh_options.forced_transport = options.transport;
  mesh_options.failure_store = boot.failure_store;

  auto world = std::make_shared<runtime::World>();
  world->identity = id;
  world->store = boot.store;
  world->server = std::move(boot.server);
  world->timeout = boot.timeout;
  world->failure_store = boot.failure_store;
  world->transport = options.transport;
  world->launch_ranks.resize(static_cast<std::size_t>(id.world_size));
  std::iota(world->launch_ranks.begin(), world->launch_ranks.end(), 0);
  world->launch_failures = boot.failure_store;
  world->mesh = transport::Mesh::create(make_prefix_store("mesh/", boot.store), self, id.world_size, mesh_options);
  set_wait_policy(*world->mesh, id);
  world->responder = std::make_unique<runtime::HangResponder>(world->failure_store, world->recorders, id.rank,
                                                              id.world_size);

  coll::GroupView view;
  view.mesh = world->mesh;
  view.rank = id.rank;
  view.size = id.world_size;
  view.world_ranks.resize(static_cast<std::size_t>(id.world_size));
  std::iota(view.world_ranks.begin(), view.world_ranks.end(), 0);
  view.context = 0;
  return std::make_shared<runtime::ProcessGroupImpl>(world, std::move(view), make_prefix_store("group/0/", boot.store));
}

void wait_all(const std::vector<WorkPtr>& works, Duration timeout) {
  // Wait for every handle even after a failure, so no operation is left running on buffers the caller frees.
  std::exception_ptr first;
  for (const WorkPtr& w : works) {
    try {
      w->wait(timeout);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace dcomm
