#pragma once
// Bootstrapping a process into its world: the timeout, the identity, the store (hosted here or connected to),
// the join through that store, and a world id. The runtime's init() calls bootstrap() first.

#include <dcomm/init.hpp>
#include <dcomm/store.hpp>

#include <memory>
#include <string>

namespace dcomm::rdzv {

struct Bootstrap {
  Identity identity;                       ///< complete and validated
  std::shared_ptr<Store> store;            ///< prefixed for this run and restart round
  std::unique_ptr<TcpStoreServer> server;  ///< set when this process hosts the store
  std::string world_id;                    ///< unique per world and round (names shm segments etc.)
  Duration timeout;                        ///< resolved: options.timeout, else DCOMM_TIMEOUT_S, else 300 s
  /// Where the world's root cause is recorded (rendezvous/failure_record.hpp): `store` when dcomm-run or this
  /// process hosts it, or when the caller gave it; null when another rank hosts it, because a rank that is
  /// stopped would make every read of it hang, and liveness checks must not.
  std::shared_ptr<Store> failure_store;
};

/// Resolves who this process is and joins the world through the store. Collective: every process of the world
/// calls it. The store is options.store if given, else the TCP store at the master address (options,
/// DCOMM_MASTER_ADDR/PORT, MASTER_ADDR/PORT, else 127.0.0.1:29500), hosted by this process when it is rank 0
/// (or, with no rank known, when it binds the port first) unless DCOMM_STORE_HOSTED=1 says dcomm-run hosts it.
/// Keys live under "<DCOMM_RUN_ID or default>/<DCOMM_RESTART_COUNT or 0>/".
Bootstrap bootstrap(const InitOptions& options);

/// The timeout bootstrap() resolves: options.timeout, else DCOMM_TIMEOUT_S (seconds), else 300 s.
Duration resolve_timeout(Duration given);

}  // namespace dcomm::rdzv
