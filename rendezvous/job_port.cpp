#include "rendezvous/job_port.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <dcomm/error.hpp>
#include <thread>

#include "common/deadline.hpp"
#include "common/env.hpp"
#include "common/log.hpp"
#include "rendezvous/socket.hpp"

namespace dcomm::rdzv {
namespace {

// The label rank 0 writes into the store it hosts, outside any run's prefix.
constexpr const char* kJobLabelKey = "dcomm/job-id";
// How long one candidate gets per pass: a refused port fails at once; a live store answers in well under this.
constexpr auto kProbeTimeout = std::chrono::milliseconds(300);
constexpr auto kPassPause = std::chrono::milliseconds(50);

// FNV-1a, 64 bit: stable across builds and machines (std::hash is not).
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string list_ports(const std::vector<uint16_t>& ports) {
  std::string out;
  for (uint16_t p : ports) out += fmt::format("{}{}", out.empty() ? "" : ", ", p);
  return out;
}

// Whether anything listens at addr:port: one connect, no retry, so a pass over closed ports takes no time.
bool listening(const std::string& addr, uint16_t port, std::string* seen) {
  std::string error;
  auto addrs = resolve(addr, port, /*passive=*/false, &error);
  int err = 0;
  if (!addrs.empty() && try_connect(addrs, Deadline::after(kProbeTimeout), &err, &error).valid()) return true;
  *seen = fmt::format("port {}: {}", port, error);
  return false;
}

// Whether the store at port is this job's: it carries the job's label. Any failure means "not (yet) ours".
std::shared_ptr<Store> probe(const JobPorts& job, const std::string& addr, uint16_t port, const TcpStoreOptions& opts,
                             std::string* seen) {
  if (!listening(addr, port, seen)) return nullptr;
  TcpStoreOptions probe_opts = opts;
  probe_opts.timeout = kProbeTimeout;
  try {
    auto store = connect_tcp_store(addr, port, probe_opts);
    if (!store->check({kJobLabelKey})) {
      *seen = fmt::format("port {}: a store without a job label yet", port);
      return nullptr;
    }
    Store::Bytes label = store->get(kJobLabelKey);
    std::string other(label.begin(), label.end());
    if (other != job.job_id) {
      *seen = fmt::format("port {}: the store of job {}", port, other);
      return nullptr;
    }
    store->set_timeout(opts.timeout);
    return store;
  } catch (const Error& e) {
    *seen = fmt::format("port {}: {}", port, e.what());
    return nullptr;
  }
}

}  // namespace

std::vector<uint16_t> derive_job_ports(const std::string& job_id, int count) {
  const uint32_t span = kJobPortHigh - kJobPortLow + 1;
  std::vector<uint16_t> ports;
  for (int i = 0; static_cast<int>(ports.size()) < count && i < 4 * count; ++i) {
    auto p = static_cast<uint16_t>(kJobPortLow + fnv1a(fmt::format("{}#{}", job_id, i)) % span);
    if (std::find(ports.begin(), ports.end(), p) == ports.end()) ports.push_back(p);
  }
  return ports;
}

std::optional<JobPorts> job_ports_from_environment() {
  JobPorts job;
  const char* which = nullptr;
  if (auto id = env::first({"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"}, &which); id && !id->empty()) {
    job.job_id = "mpirun:" + *id;
    job.origin = fmt::format("{}={}", which, *id);
  } else if (auto slurm = env::get("SLURM_JOB_ID"); slurm && !slurm->empty()) {
    std::string step = env::get("SLURM_STEP_ID").value_or("0");
    job.job_id = fmt::format("slurm:{}.{}", *slurm, step);
    job.origin = fmt::format("SLURM_JOB_ID={} SLURM_STEP_ID={}", *slurm, step);
  } else {
    return std::nullopt;
  }
  job.ports = derive_job_ports(job.job_id);
  return job;
}

std::shared_ptr<Store> open_job_store(const JobPorts& job, const std::string& addr, bool host,
                                      const std::string& bind_addr, const TcpStoreOptions& opts,
                                      std::unique_ptr<TcpStoreServer>* server) {
  if (host) {
    std::string last;
    for (uint16_t port : job.ports) {
      try {
        *server = start_tcp_store_server(bind_addr, port, opts);
      } catch (const SystemError& e) {
        if (e.error_number() != EADDRINUSE) throw;
        last = e.what();
        continue;
      }
      auto store = connect_tcp_store(addr, port, opts);
      const std::string& id = job.job_id;
      store->set(kJobLabelKey, Store::Bytes(id.begin(), id.end()));
      DCOMM_INFO("bootstrap: hosting the store of job {} ({}) at {}:{} (no MASTER_PORT set)", id, job.origin, bind_addr,
                 port);
      return store;
    }
    throw SystemError(fmt::format("bootstrap: cannot host the store of job {} ({}): every candidate port on {} is "
                                  "taken ({}); last error: {}; set MASTER_PORT to a free port",
                                  job.job_id, job.origin, bind_addr, list_ports(job.ports), last),
                      EADDRINUSE);
  }
  Deadline deadline = Deadline::after(opts.timeout);
  std::string seen;
  for (;;) {
    for (uint16_t port : job.ports) {
      if (auto store = probe(job, addr, port, opts, &seen)) {
        DCOMM_DEBUG("bootstrap: found the store of job {} at {}:{}", job.job_id, addr, port);
        return store;
      }
      if (deadline.expired()) {
        throw TimeoutError(fmt::format(
            "bootstrap: no store of job {} ({}) at {} on its ports {} after {}; last seen: {}; check that rank 0 "
            "of this job started (it hosts the store), or set MASTER_ADDR/MASTER_PORT",
            job.job_id, job.origin, addr, list_ports(job.ports), format_duration(deadline.elapsed()), seen));
      }
    }
    std::this_thread::sleep_for(kPassPause);
  }
}

}  // namespace dcomm::rdzv
