#include "rendezvous/bootstrap.hpp"

#include <dcomm/error.hpp>

#include "common/deadline.hpp"
#include "common/env.hpp"
#include "common/log.hpp"
#include "rendezvous/exchange.hpp"
#include "rendezvous/hello.hpp"
#include "rendezvous/identity.hpp"
#include "rendezvous/job_port.hpp"
#include "rendezvous/socket.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <thread>

namespace dcomm::rdzv {
namespace {

constexpr const char* kDefaultMasterAddr = "127.0.0.1";
constexpr int kDefaultMasterPort = 29500;
constexpr auto kDefaultTimeout = std::chrono::seconds(300);
constexpr const char* kFailedKey = "rdzv/failed";
// The failure store's bound on any call: it is read from wait loops, which must stay responsive.
constexpr auto kFailureStoreTimeout = std::chrono::seconds(5);

struct Master {
  std::string addr;
  uint16_t port;
  /// Under mpirun or Slurm with no port given: the job's own ports instead of the fixed default (job_port.hpp).
  std::optional<JobPorts> job;
};

Master resolve_master(const InitOptions& o) {
  Master m;
  m.addr = !o.master_addr.empty() ? o.master_addr : env::first({"DCOMM_MASTER_ADDR", "MASTER_ADDR"}).value_or("");
  if (m.addr.empty()) m.addr = kDefaultMasterAddr;
  long long port = o.master_port;
  std::string origin = "InitOptions::master_port";
  if (port == -1) {
    const char* which = nullptr;
    if (env::first({"DCOMM_MASTER_PORT", "MASTER_PORT"}, &which)) {
      port = *env::get_int(which);
      origin = which;
    } else if ((m.job = job_ports_from_environment())) {
      port = m.job->ports.front();
    } else {
      port = kDefaultMasterPort;
    }
  }
  if (port < 1 || port > 65535) {
    throw InvalidUsageError(fmt::format("the store's port {} ({}) is not in 1..65535", port, origin));
  }
  m.port = static_cast<uint16_t>(port);
  return m;
}

// Connects to the TCP store at the master address, hosting it here first when this process is the one to:
// nobody when dcomm-run hosts it (DCOMM_STORE_HOSTED=1), else rank 0, else (no rank known) whoever binds the
// master address first. Rank 0 binds every interface unless the address is loopback, so that other hosts reach
// it under any of this host's names (and then needs a secret); a process without a rank binds the master address
// itself, which also tells it whether the address is on this host at all. Every hello names this process's job
// (launcher run id and world size), so that a client of another job that meets this one on the port is refused.
std::shared_ptr<Store> open_tcp_store(const Master& m, int rank, int world_size, Duration timeout,
                                      std::unique_ptr<TcpStoreServer>* server) {
  TcpStoreOptions opts;
  opts.timeout = timeout;
  opts.run_id = run_id_from_environment();
  opts.world_size = world_size > 0 ? world_size : 0;
  if (env::get_bool("DCOMM_STORE_HOSTED", false)) {
    DCOMM_DEBUG("bootstrap: dcomm-run hosts the store at {}:{}", m.addr, m.port);
  } else if (m.job && rank >= 0) {
    return open_job_store(*m.job, m.addr, rank == 0, is_loopback_host(m.addr) ? m.addr : "0.0.0.0", opts, server);
  } else if (rank == 0) {
    bool loopback = is_loopback_host(m.addr);
    try {
      *server = start_tcp_store_server(loopback ? m.addr : "0.0.0.0", m.port, opts);
    } catch (const InvalidUsageError& e) {
      throw InvalidUsageError(fmt::format("rank 0 hosts the store and, as the master address {} is not a loopback "
                                          "one, must listen on every interface: {}",
                                          m.addr, e.what()));
    }
  } else if (rank < 0) {
    try {
      *server = start_tcp_store_server(m.addr, m.port, opts);
    } catch (const SystemError& e) {
      if (e.error_number() != EADDRINUSE && e.error_number() != EADDRNOTAVAIL) throw;
      DCOMM_DEBUG("bootstrap: cannot host the store at {}:{} ({}); joining it as a client", m.addr, m.port,
                  e.what());
    }
  }
  return connect_tcp_store(m.addr, m.port, opts);
}

// "a-run/2" -> "a-run_2": world ids name shared-memory segments, which allow no '/'.
std::string sanitize(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    if (!ok) c = '_';
  }
  return out;
}

// A failed join fails every participant, each after reading the records. The process hosting the store must not
// take it down while the others still read, or they would see a closed connection instead of the real conflict:
// each counts itself out, and the host waits (briefly) until everyone who joined has.
void leave_failed_join(Store& store, bool hosting, Duration timeout) noexcept {
  constexpr auto kMaxLinger = std::chrono::seconds(5);
  constexpr auto kPoll = std::chrono::milliseconds(20);
  try {
    int64_t left = store.add(kFailedKey, 1);
    if (!hosting) return;
    Deadline deadline = Deadline::after(std::min<Duration>(timeout, kMaxLinger));
    while (left < store.add(kJoinedKey, 0) && !deadline.expired()) {
      std::this_thread::sleep_for(kPoll);
      left = store.add(kFailedKey, 0);
    }
  } catch (const std::exception& e) {
    DCOMM_DEBUG("bootstrap: could not count this process out of the failed join: {}", e.what());
  }
}

}  // namespace

Duration resolve_timeout(Duration given) {
  if (given != dcomm::kDefaultTimeout) {
    if (given < Duration(0)) {
      throw InvalidUsageError(fmt::format("InitOptions::timeout {} ms is negative; use a duration, "
                                          "kDefaultTimeout or kNoTimeout",
                                          given.count()));
    }
    return given;
  }
  double s = env::get_double("DCOMM_TIMEOUT_S", -1.0);
  if (s == -1.0 && !env::get("DCOMM_TIMEOUT_S")) return kDefaultTimeout;
  if (!(s > 0.0) || !std::isfinite(s)) {
    throw InvalidUsageError(fmt::format("DCOMM_TIMEOUT_S={} must be a positive number of seconds", s));
  }
  return Duration(static_cast<int64_t>(s * 1000.0));
}

Bootstrap bootstrap(const InitOptions& options) {
  Bootstrap b;
  b.timeout = resolve_timeout(options.timeout);
  IdentityOrigins origins;
  Identity declared = resolve_partial_identity(options, &origins);
  std::string own_error = range_error(declared, origins).value_or("");

  std::string run_id = env::get("DCOMM_RUN_ID").value_or("default");
  long long restart = env::get_int("DCOMM_RESTART_COUNT", 0);
  std::string prefix = fmt::format("{}/{}/", run_id, restart);

  std::shared_ptr<Store> base = options.store;
  std::shared_ptr<Store> failures = options.store;
  if (!base) {
    try {
      Master master = resolve_master(options);
      base = open_tcp_store(master, declared.rank, declared.world_size, b.timeout, &b.server);
      // A connection of its own: liveness checks and the flight recorder's thread must never queue behind a
      // caller's blocking get on the shared one. Only a store that cannot stop answering (dcomm-run's, or this
      // process's) is read from wait loops.
      if (b.server || env::get_bool("DCOMM_STORE_HOSTED", false)) {
        TcpStoreOptions opts;
        opts.timeout = kFailureStoreTimeout;
        opts.run_id = run_id_from_environment();
        // Under mpirun rank 0 may have taken another of the job's ports (job_port.hpp).
        failures = connect_tcp_store(master.addr, b.server ? b.server->port() : master.port, opts);
      }
    } catch (const Error& e) {
      // This process's own mistake explains more than the store it then could not reach.
      if (own_error.empty()) throw;
      throw InvalidUsageError(fmt::format("bootstrap: {} (and the store was unreachable: {})", own_error, e.what()));
    }
  }
  b.store = make_prefix_store(prefix, base);
  if (failures) b.failure_store = make_prefix_store(prefix, failures);

  Joined joined;
  try {
    joined = join_world(declared, own_error, *b.store, b.timeout, FailureWatch{b.failure_store.get(), declared.rank});
  } catch (const Error&) {
    leave_failed_join(*b.store, b.server != nullptr, b.timeout);
    throw;
  }
  b.identity = joined.identity;
  b.world_id = fmt::format("{}-{}-{:016x}", sanitize(run_id), restart, joined.world_nonce);
  log::set_rank(b.identity.rank, b.identity.world_size);
  DCOMM_INFO("bootstrap: rank {}/{} (local {}/{}, node {}/{}, host {}) from {} via {}", b.identity.rank,
             b.identity.world_size, b.identity.local_rank, b.identity.local_world_size, b.identity.node_rank,
             b.identity.node_count, b.identity.host_id, b.identity.source, b.store->describe());
  return b;
}

}  // namespace dcomm::rdzv
