// Mesh::create: the collective setup of a world's mesh.
//   1. number this setup round (so several meshes can share one store) and agree on a world id;
//   2. create the transports (the forced one, or every one in the table that starts here);
//   3. each transport publishes its details under mesh/<round>/t/<name>/, then the rank publishes its PeerInfo;
//   4. read every peer's record, pick per peer the highest-priority transport both sides have that can connect;
//   5. connect each transport to its peers, then a store barrier so no rank sends before its peers are connected.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "common/env.hpp"
#include "common/log.hpp"
#include "transports/mesh_impl.hpp"
#include "transports/peer_table.hpp"
#include "transports/registry.hpp"
#include "transports/staging/staged_transport.hpp"
#include "transports/store_keys.hpp"

namespace dcomm::transport {
namespace {

// Starts with dcomm-run's run id when there is one: shared-memory segments are named after the world id, and
// dcomm-run removes the ones of its run that a rank killed during setup left in /dev/shm.
std::string random_world_id(const PeerInfo& self, int64_t round) {
  std::random_device rd;
  std::string run = env::get("DCOMM_RUN_ID").value_or("");
  return fmt::format("{}{}{}-{}-{}-{:08x}", run, run.empty() ? "" : "-", self.pid != 0 ? self.pid : ::getpid(), round,
                     rd() & 0xFFFF, rd());
}

std::string built_transports() {
  std::string names;
  for (const auto& e : transport_table()) names.append(names.empty() ? "" : ", ").append(e.name);
  return names.empty() ? "none" : names;
}

std::vector<std::unique_ptr<Transport>> create_transports(const TransportContext& ctx, const std::string& forced,
                                                          const std::string& what) {
  std::vector<std::unique_ptr<Transport>> out;
  if (!forced.empty()) {
    const TransportEntry* e = find_transport(forced);
    if (e == nullptr) {
      throw InvalidUsageError(fmt::format("{}: transport '{}' (from DCOMM_TRANSPORT or the options) is not in this "
                                          "build; built: {}",
                                          what, forced, built_transports()));
    }
    out.push_back(e->create(ctx));
    return out;
  }
  for (const auto& e : transport_table()) {
    try {
      out.push_back(e.create(ctx));
    } catch (const std::exception& ex) {
      // A transport that cannot start here (no UCX device, no GPU) is simply not offered to peers.
      DCOMM_INFO("{}: transport {} unavailable: {}", what, e.name, ex.what());
    }
  }
  return out;
}

/// Wraps every transport that moves host memory in a StagedTransport, which stages device buffers through pinned
/// host chunks (or passes them through where the transport moves them itself) and parses staged messages from
/// peers whatever memory they are received into. cuda_ipc moves only device memory and needs no wrapping.
void wrap_for_staging(std::vector<std::unique_ptr<Transport>>& transports,
                      const std::shared_ptr<staging::Stager>& stager) {
  for (auto& t : transports) {
    if (t->supports_device(Device::host())) {
      t = std::make_unique<staging::StagedTransport>(std::move(t), stager);
    }
  }
}

/// Picks, per peer, the first transport (highest priority) that both sides created and that can connect.
std::vector<Transport*> choose_routes(const std::vector<std::unique_ptr<Transport>>& transports,
                                      const std::vector<PeerRecord>& records, int self, const std::string& what) {
  std::vector<Transport*> route(records.size(), nullptr);
  const PeerInfo& me = records[static_cast<std::size_t>(self)].info;
  for (std::size_t p = 0; p < records.size(); ++p) {
    if (static_cast<int>(p) == self) continue;
    for (const auto& t : transports) {
      if (records[p].has(t->name()) && t->can_connect(me, records[p].info) && t->supports_device(Device::host())) {
        route[p] = t.get();
        break;
      }
    }
    if (route[p] == nullptr) {
      std::string mine;
      for (const auto& t : transports) mine.append(mine.empty() ? "" : ", ").append(t->name());
      throw InvalidUsageError(fmt::format(
          "{}: no transport reaches rank {} (host {}, pid {}): this rank has [{}], it has [{}], and none of the "
          "common ones can connect; build with ucx for ranks on other hosts, or check DCOMM_TRANSPORT",
          what, p, records[p].info.hostname, records[p].info.pid, mine, fmt::join(records[p].transports, ", ")));
    }
  }
  return route;
}

/// Per peer, the first transport both sides created that can connect and moves CUDA memory: cuda_ipc on one node,
/// else the staging wrapper of the host route (when this build can stage), or null: device buffers to that peer
/// then take its host route, which refuses them.
std::vector<Transport*> choose_device_routes(const std::vector<std::unique_ptr<Transport>>& transports,
                                             const std::vector<PeerRecord>& records, int self) {
  std::vector<Transport*> route(records.size(), nullptr);
  const PeerInfo& me = records[static_cast<std::size_t>(self)].info;
  for (std::size_t p = 0; p < records.size(); ++p) {
    if (static_cast<int>(p) == self) continue;
    for (const auto& t : transports) {
      if (records[p].has(t->name()) && t->supports_device(Device::cuda(0)) && t->can_connect(me, records[p].info)) {
        route[p] = t.get();
        break;
      }
    }
  }
  return route;
}

// Setup failed with `error`; when another rank failed first (rendezvous/failure_record.hpp), the error it led to
// here (a refused UCX endpoint, a segment gone, a survivor that left) is told after that rank. The record may
// come a moment after the symptom (dcomm-run reaps the dead rank within milliseconds), so it is waited for
// briefly: this rank is failing anyway, and naming the right rank is worth a fraction of a second.
std::string blame_setup_failure(Store* failures, int self, const std::string& error) {
  constexpr auto kWaitForRecord = std::chrono::milliseconds(500);
  if (failures == nullptr || error.find("failed first") != std::string::npos) return {};
  Deadline deadline = Deadline::after(kWaitForRecord);
  for (;;) {
    auto root = rdzv::read_failure(*failures);
    if (root && root->rank != self) {
      return fmt::format("rank {} failed first: {}; this rank then saw: {}", root->rank, root->describe(), error);
    }
    if (deadline.expired()) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

std::shared_ptr<Mesh> Mesh::create(std::shared_ptr<Store> store, const PeerInfo& self, int world_size,
                                   const MeshOptions& options) {
  std::string what = fmt::format("mesh setup rank {}/{}", self.rank, world_size);
  if (!store) throw InvalidUsageError(what + ": no store");
  if (world_size < 1 || self.rank < 0 || self.rank >= world_size) {
    throw InvalidUsageError(fmt::format("{}: rank {} is outside a world of {}", what, self.rank, world_size));
  }
  Deadline deadline = Deadline::after(options.timeout);
  // Every rank of a round adds once before any rank leaves the round's final barrier, so the count tells rounds
  // apart without any other coordination.
  int64_t round = (store->add("mesh/rounds", 1) - 1) / world_size;
  std::string prefix = fmt::format("mesh/{}/", round);
  rdzv::FailureWatch watch{options.failure_store.get(), self.rank};
  if (self.rank == 0) store->set(prefix + "world_id", random_world_id(self, round));
  rdzv::wait_watching_failures(*store, {prefix + "world_id"}, deadline, watch, what);

  TransportContext ctx;
  ctx.self = self;
  ctx.world_size = world_size;
  ctx.timeout = options.timeout;
  ctx.world_id = store->get_string(prefix + "world_id");
  ctx.failures = watch;
  std::string forced = options.forced_transport;
  if (forced.empty()) forced = env::get("DCOMM_TRANSPORT").value_or("");
  auto stager = options.stager ? options.stager : staging::default_stager();
  auto transports = create_transports(ctx, forced, what);
  wrap_for_staging(transports, stager);
  auto close_all = [&] {
    for (auto& t : transports) {
      if (t) t->close();
    }
  };
  try {
    PeerRecord mine{self, {}};
    for (auto& t : transports) {
      t->publish(*make_prefix_store(prefix + "t/" + t->name() + "/", store));
      mine.transports.emplace_back(t->name());
    }
    store->set(rank_key(prefix + "peer", self.rank), encode_peer(mine));
    wait_for_ranks(*store, prefix + "peer", world_size, deadline, what, "publish their peer info", watch);
    std::vector<PeerRecord> records;
    for (int r = 0; r < world_size; ++r) {
      std::string key = rank_key(prefix + "peer", r);
      records.push_back(decode_peer(store->get(key), key));
      if (records.back().info.rank != r) {
        throw InvalidUsageError(fmt::format("{}: store key '{}' holds rank {}'s record; do two ranks share a rank?",
                                            what, key, records.back().info.rank));
      }
    }
    auto route = choose_routes(transports, records, self.rank, what);
    auto device_route = choose_device_routes(transports, records, self.rank);

    // Connect each transport to the peers it was chosen for; drop the ones no peer uses.
    for (auto& t : transports) {
      std::vector<PeerInfo> peers;
      for (std::size_t p = 0; p < route.size(); ++p) {
        if (route[p] == t.get() || device_route[p] == t.get()) peers.push_back(records[p].info);
      }
      if (peers.empty()) {
        t->close();
        t.reset();
        continue;
      }
      t->connect(*make_prefix_store(prefix + "t/" + t->name() + "/", store), peers, deadline);
    }
    std::erase(transports, nullptr);
    store->set(rank_key(prefix + "ready", self.rank), std::string("1"));
    wait_for_ranks(*store, prefix + "ready", world_size, deadline, what, "finish connecting", watch);

    std::vector<PeerInfo> infos;
    for (auto& rec : records) infos.push_back(rec.info);
    for (int p = 0; p < world_size; ++p) {
      if (p != self.rank) DCOMM_DEBUG("{}: rank {} over {}", what, p, route[static_cast<std::size_t>(p)]->name());
    }
    return std::make_shared<MeshImpl>(std::move(infos), self.rank, std::move(transports), std::move(route),
                                      options, std::move(device_route));
  } catch (const Error& e) {
    // The world failed: close without waiting on peers (a UCX endpoint whose connect failed must not be flushed).
    for (auto& t : transports) {
      if (t) t->abandon();
    }
    close_all();
    if (e.code() == ErrorCode::kInvalidUsage) throw;
    std::string blamed = blame_setup_failure(options.failure_store.get(), self.rank, e.what());
    if (blamed.empty()) throw;
    std::rethrow_exception(make_error(e.code() == ErrorCode::kTimeout ? e.code() : ErrorCode::kRemoteError, blamed));
  } catch (...) {
    for (auto& t : transports) {
      if (t) t->abandon();
    }
    close_all();
    throw;
  }
}

}  // namespace dcomm::transport
