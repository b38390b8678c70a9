#pragma once
// The hello frame, the first request on every connection to a TCP store: the shared secret and the job the client
// belongs to. The server admits a client only when the secret matches and the job does not contradict its own, so
// that two jobs that meet on one port by accident (two mpirun jobs on one host, both on 29500) fail at once with
// a message naming both jobs instead of mixing their keys.

#include <cstdint>
#include <optional>
#include <string>

#include "rendezvous/protocol.hpp"

namespace dcomm::rdzv {

/// Which job a store or client belongs to. Empty run id / world size 0 mean unknown, which matches anything.
struct JobIdentity {
  std::string run_id;  ///< self-describing: "DCOMM_RUN_ID=1f2e...", "SLURM_JOB_ID=42.0", "PMIX_NAMESPACE=1050869761"
  int64_t world_size = 0;
  /// "job DCOMM_RUN_ID=1f2e (world size 4)", "job of unknown run id (world size 4)", "an unnamed job".
  std::string describe() const;
};

/// The job identity of this process's launcher, from the first of DCOMM_RUN_ID, SLURM_JOB_ID (+ SLURM_STEP_ID),
/// PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid, TORCHELASTIC_RUN_ID; empty when none is set.
std::string run_id_from_environment();

/// Why a client of job `client` may not use a store of job `server`, or nullopt when it may.
std::optional<std::string> job_mismatch(const JobIdentity& server, const JobIdentity& client);

/// Limits on a hello's fields, so the first frame before authentication stays small (kMaxHelloBytes).
inline constexpr std::size_t kMaxSecretBytes = 1024;
inline constexpr std::size_t kMaxRunIdBytes = 512;
inline constexpr std::size_t kMaxHelloBytes = 4096;
static_assert(kMaxSecretBytes + kMaxRunIdBytes + 3 * 8 <= kMaxHelloBytes);

struct Hello {
  std::string secret;
  JobIdentity job;
};

/// The hello request frame. Throws InvalidUsageError when a field is over its limit.
proto::Bytes encode_hello(const Hello& h);
/// Why the server must close a connection whose next frame has this header, before buffering its payload, or
/// nullopt when the frame may be read. `authed`: the connection's hello was accepted. `tell_client`: the reason is
/// worth an error reply (a stranger that may be an honest client of another version or job).
struct FrameProblem {
  std::string reason;
  bool tell_client = false;
};
std::optional<FrameProblem> frame_problem(const proto::Header& h, bool authed, std::size_t max_frame);

/// Decodes a hello payload: the secret, then optionally (clients since issue 13) the run id and world size.
/// Throws proto::ProtocolError when it is malformed or a field is over its limit.
Hello decode_hello(const uint8_t* payload, std::size_t n);

}  // namespace dcomm::rdzv
