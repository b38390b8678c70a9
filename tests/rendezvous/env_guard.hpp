#pragma once
// Clears every variable identity resolution reads, sets the ones a test asks for, and restores all on exit.
// Only the main thread may use it, before starting any thread that reads the environment.

#include <stdlib.h>

#include <map>
#include <optional>
#include <string>

namespace dcomm::test {

/// Every variable identity resolution and bootstrap read.
inline constexpr const char* kIdentityVars[] = {
    "DCOMM_RANK", "DCOMM_WORLD_SIZE", "DCOMM_LOCAL_RANK", "DCOMM_LOCAL_WORLD_SIZE", "DCOMM_NODE_RANK",
    "DCOMM_NODE_COUNT", "DCOMM_MASTER_ADDR", "DCOMM_MASTER_PORT", "DCOMM_HOST_ID", "DCOMM_RUN_ID",
    "DCOMM_RESTART_COUNT", "DCOMM_STORE_HOSTED", "DCOMM_STORE_SECRET", "DCOMM_STORE_SECRET_FILE",
    "DCOMM_STORE_INSECURE", "DCOMM_TIMEOUT_S", "SLURM_JOB_ID", "SLURM_STEP_ID", "PMIX_NAMESPACE",
    "OMPI_MCA_ess_base_jobid", "TORCHELASTIC_RUN_ID", "RANK", "WORLD_SIZE",
    "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_COMM_WORLD_NODE_RANK", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "SLURM_PROCID", "SLURM_NTASKS",
    "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NNODES", "SLURM_JOB_ID", "SLURM_STEP_ID"};

class EnvGuard {
 public:
  EnvGuard() {
    for (const char* v : kIdentityVars) {
      const char* old = ::getenv(v);
      saved_[v] = old ? std::optional<std::string>(old) : std::nullopt;
      ::unsetenv(v);
    }
  }
  ~EnvGuard() {
    for (auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

  EnvGuard& set(const char* name, const std::string& value) {
    ::setenv(name, value.c_str(), 1);
    return *this;
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace dcomm::test
