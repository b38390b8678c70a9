#include "tools/bench/mpi_boot.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "common/deadline.hpp"
#include "tools/bench/sweep.hpp"
#include "tools/bench/watchdog.hpp"

extern char** environ;

namespace dcomm::bench {
namespace {

constexpr const char* kUseMpirun =
    "or launch under mpirun instead: mpirun -np N --oversubscribe [--allow-run-as-root] dcomm-bench ... --vs mpi";

std::string store_string(Store& store, const std::string& key, Duration timeout) {
  store.wait({key}, timeout);
  return store.get_string(key);
}

}  // namespace

MpiSession::MpiSession(const ProcessGroupPtr& pg, Duration timeout) {
  // OpenMPI refuses root without these; the user asked for MPI, and mpirun users pass --allow-run-as-root.
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
  try {
    if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) {
      join_world();
    } else {
      join_singletons(pg, timeout);
    }
  } catch (...) {
    teardown();  // a failed join must not leave an ompi-server behind
    throw;
  }
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  int rank = -1, size = -1;
  MPI_Comm_rank(comm_, &rank);
  MPI_Comm_size(comm_, &size);
  if (rank != pg->rank() || size != pg->size()) {
    throw BenchFailure(fmt::format("dcomm-bench: error: --vs mpi: MPI made this process rank {}/{} but dcomm made "
                                   "it {}/{}; launch both from one launcher",
                                   rank, size, pg->rank(), pg->size()),
                       1);
  }
}

void MpiSession::join_world() {
  MPI_Init(nullptr, nullptr);
  initialized_ = true;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
}

void MpiSession::start_server(Store& store, Duration timeout) {
  const std::string uri_file = fmt::format("/tmp/dcomm-bench-ompi-server-{}.uri", getpid());
  std::remove(uri_file.c_str());
  const char* argv[] = {"ompi-server", "--no-daemonize", "--report-uri", uri_file.c_str(), nullptr};
  if (int rc = posix_spawnp(&server_pid_, "ompi-server", nullptr, nullptr, const_cast<char* const*>(argv), environ);
      rc != 0) {
    server_pid_ = -1;
    throw BenchFailure(fmt::format("dcomm-bench: error: --vs mpi under dcomm-run starts OpenMPI's ompi-server, "
                                   "which could not be started ({}); install it, {}",
                                   std::strerror(rc), kUseMpirun),
                       1);
  }
  Deadline deadline = Deadline::after(timeout);
  Backoff backoff(std::chrono::milliseconds(20));
  std::string uri;
  while (uri.empty()) {
    int status = 0;
    if (waitpid(server_pid_, &status, WNOHANG) == server_pid_) {
      server_pid_ = -1;
      throw BenchFailure(fmt::format("dcomm-bench: error: --vs mpi: ompi-server exited at start (status {}); {}",
                                     status, kUseMpirun), 1);
    }
    if (deadline.expired()) {
      throw BenchFailure(fmt::format("dcomm-bench: error: --vs mpi: ompi-server wrote no URI to {} within {}; {}",
                                     uri_file, format_duration(timeout), kUseMpirun), 1);
    }
    std::ifstream in(uri_file);
    if (!std::getline(in, uri)) uri.clear();
    if (uri.empty()) backoff.pause();
  }
  std::remove(uri_file.c_str());
  store.set("mpi/uri", uri);
}

void MpiSession::join_singletons(const ProcessGroupPtr& pg, Duration timeout) {
  std::shared_ptr<Store> store = make_prefix_store("bench/", pg->store());
  const int rank = pg->rank();
  if (rank == 0) start_server(*store, timeout);
  setenv("OMPI_MCA_pmix_server_uri", store_string(*store, "mpi/uri", timeout).c_str(), 1);
  // Accept and connect have no timeout of their own: the watchdog bounds the whole join.
  Watchdog guard(timeout, [this, rank, timeout] {
    std::fprintf(stderr, "dcomm-bench: error: --vs mpi: rank %d could not join the MPI singletons through "
                 "ompi-server within %s; %s\n", rank, format_duration(timeout).c_str(), kUseMpirun);
    if (server_pid_ > 0) kill(server_pid_, SIGTERM);
  });
  guard.arm();
  MPI_Init(nullptr, nullptr);
  initialized_ = true;
  char port[MPI_MAX_PORT_NAME] = {};
  if (rank == 0) {
    MPI_Open_port(MPI_INFO_NULL, port);
    store->set("mpi/port", std::string(port));
  } else {
    fmt::format_to_n(port, sizeof port - 1, "{}", store_string(*store, "mpi/port", timeout));
  }
  MPI_Comm current = rank == 0 ? MPI_COMM_SELF : MPI_COMM_NULL;
  for (int k = 1; k < pg->size(); ++k) {
    if (rank > k) continue;  // not yet this rank's turn
    MPI_Comm inter = MPI_COMM_NULL, merged = MPI_COMM_NULL;
    const std::string turn = fmt::format("mpi/turn/{}", k);
    if (rank < k) {
      // Rank k connects only once told: a later rank connecting early would be accepted in k's place.
      if (rank == 0) store->set(turn, std::string("1"));
      MPI_Comm_accept(port, MPI_INFO_NULL, 0, current, &inter);
    } else {
      store->wait({turn}, timeout);
      MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
    }
    MPI_Intercomm_merge(inter, rank == k ? 1 : 0, &merged);  // the newcomer goes last
    links_.push_back(inter);
    if (current != MPI_COMM_SELF && current != MPI_COMM_NULL) links_.push_back(current);
    current = merged;
  }
  if (rank == 0) MPI_Close_port(port);
  comm_ = current;
  guard.disarm();
}

MpiSession::~MpiSession() { teardown(); }

void MpiSession::teardown() noexcept {
  if (initialized_) {
    initialized_ = false;
    // Tested with OpenMPI 4.1: the intercommunicators between singleton jobs must be disconnected, and the
    // merged intracommunicators freed (disconnecting those hangs).
    if (comm_ != MPI_COMM_NULL && comm_ != MPI_COMM_SELF && comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
    for (auto it = links_.rbegin(); it != links_.rend(); ++it) {
      int inter = 0;
      MPI_Comm_test_inter(*it, &inter);
      if (inter) {
        MPI_Comm_disconnect(&*it);
      } else {
        MPI_Comm_free(&*it);
      }
    }
    MPI_Finalize();
  }
  if (server_pid_ > 0) {
    kill(server_pid_, SIGTERM);
    waitpid(server_pid_, nullptr, 0);
    server_pid_ = -1;
  }
}

}  // namespace dcomm::bench
