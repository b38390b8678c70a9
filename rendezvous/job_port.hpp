#pragma once
// The store's port under mpirun and Slurm when nobody set MASTER_PORT: derived from the job's id, so that two jobs
// on one host do not both reach for one fixed port. Rank 0 hosts the store on the first of the job's candidate
// ports it can bind and labels the store with the job id; the other ranks try the candidates until they find the
// store that carries their job's label (another job's store, or something that is not a store, is skipped).

#include <cstdint>
#include <dcomm/store.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dcomm::rdzv {

struct JobPorts {
  std::string job_id;           ///< e.g. "mpirun:1390739457", "slurm:4242.0"
  std::string origin;           ///< the variable(s) it came from, for messages
  std::vector<uint16_t> ports;  ///< candidates, in the order rank 0 tries them
};

/// How many candidate ports a job has: enough that several jobs on one host find a free one.
inline constexpr int kJobPortCandidates = 16;
/// Candidates lie in [kJobPortLow, kJobPortHigh], below Linux's ephemeral range (32768-60999), so a port is
/// rarely taken by an outgoing connection.
inline constexpr uint16_t kJobPortLow = 20000;
inline constexpr uint16_t kJobPortHigh = 32767;

/// The job's candidate ports: a hash of the job id, the same on every rank.
std::vector<uint16_t> derive_job_ports(const std::string& job_id, int count = kJobPortCandidates);

/// The job under mpirun (OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE) or Slurm (SLURM_JOB_ID and SLURM_STEP_ID),
/// or nullopt when neither launched this process.
std::optional<JobPorts> job_ports_from_environment();

/// Rank 0 (`host`): binds bind_addr on the first candidate port that is free, labels the store and returns a client
/// of it (*server keeps it running). The others: connect to addr on the candidates until one carries this job's
/// label, up to opts.timeout. Throws TimeoutError naming the job and the ports tried.
std::shared_ptr<Store> open_job_store(const JobPorts& job, const std::string& addr, bool host,
                                      const std::string& bind_addr, const TcpStoreOptions& opts,
                                      std::unique_ptr<TcpStoreServer>* server);

}  // namespace dcomm::rdzv
