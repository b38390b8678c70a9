#include "tools/run/store_secret.hpp"

#include <dcomm/error.hpp>
#include <fmt/format.h>

#include "rendezvous/secret.hpp"

namespace dcomm::run {

std::string launch_secret(const LaunchOptions& o) {
  std::string given;
  try {
    given = rdzv::resolve_secret("");
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (!given.empty()) return given;
  if (rdzv::insecure_chosen() || !o.host_store) return "";
  if (o.nnodes == 1) return rdzv::generate_secret();
  // Handing a fresh secret to the other launchers through the store itself would hand it to anyone who reaches
  // the store: the launchers need one they already share.
  throw UsageError(fmt::format("--nnodes {} needs a store secret shared by every node's dcomm-run (node 0's store "
                               "listens on {}:{}); {}",
                               o.nnodes_text(), o.master_addr, o.master_port, rdzv::kSecretHowTo));
}

std::string job_run_id(const std::string& run_id) { return run_id.empty() ? "" : "DCOMM_RUN_ID=" + run_id; }

TcpStoreOptions store_options(const LaunchOptions& o, const std::string& secret, const std::string& run_id) {
  TcpStoreOptions opts;
  opts.secret = secret;
  // Chosen explicitly (DCOMM_STORE_INSECURE=1) or the store is another's: no secret to require.
  opts.allow_unauthenticated = secret.empty();
  opts.run_id = job_run_id(run_id);
  // An elastic world's size changes from round to round: the server cannot hold its clients to one.
  opts.world_size = o.elastic() ? 0 : o.world_size();
  return opts;
}

TcpStoreOptions launcher_client_options(const LaunchOptions& o, const std::string& secret, const std::string& run_id) {
  TcpStoreOptions opts = store_options(o, secret, run_id);
  // Launchers whose world sizes differ are reported by the node rendezvous, naming the options that differ.
  opts.world_size = 0;
  return opts;
}

}  // namespace dcomm::run
