#pragma once
// The store's secret and job identity for one dcomm-run launch (issue 13). On one node dcomm-run starts every
// client of its store itself, so it makes a fresh random secret per launch and hands it to its ranks in their
// environment (DCOMM_STORE_SECRET: not on any command line, and /proc/<pid>/environ is readable by the user alone).
// Across nodes the launchers must already share one to be admitted to node 0's store: the user gives it to every
// node (DCOMM_STORE_SECRET or DCOMM_STORE_SECRET_FILE), and each launcher hands it to its ranks the same way.

#include <string>

#include <dcomm/store.hpp>

#include "tools/run/options.hpp"

namespace dcomm::run {

/// The secret of this launch: the user's (DCOMM_STORE_SECRET, DCOMM_STORE_SECRET_FILE), else a fresh one on a
/// single node that hosts its store, else none when DCOMM_STORE_INSECURE=1 or the store is another's
/// (--rdzv-endpoint). Throws UsageError saying how to give one when several nodes have none.
std::string launch_secret(const LaunchOptions& o);

/// The options of this launcher's store server or client: the secret and the job (run id, world size), so that
/// the server refuses clients of another job. run_id may be empty (a node > 0 does not know it yet).
TcpStoreOptions store_options(const LaunchOptions& o, const std::string& secret, const std::string& run_id);

/// store_options for a launcher's own client (the node rendezvous): the job without its world size, which the
/// rendezvous checks itself with a better message (`nodes disagree: ... --nproc-per-node`).
TcpStoreOptions launcher_client_options(const LaunchOptions& o, const std::string& secret, const std::string& run_id);

/// "DCOMM_RUN_ID=<id>": a run id as it appears in the store's job identity (what bootstrap() reads in the ranks).
std::string job_run_id(const std::string& run_id);

}  // namespace dcomm::run
