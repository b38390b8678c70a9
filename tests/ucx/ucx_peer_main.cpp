#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>

#include "common/env.hpp"
#include "tests/ucx/ucx_peer.hpp"

namespace dcomm::test {

std::shared_ptr<transport::Mesh> join_mesh(std::unique_ptr<TcpStoreServer>& server) {
  // dcomm-run exports the identity and the store's address; the store is the launcher's when
  // DCOMM_STORE_HOSTED=1, else rank 0 hosts it.
  const int rank = static_cast<int>(env::get_int("DCOMM_RANK").value_or(-1));
  const int size = static_cast<int>(env::get_int("DCOMM_WORLD_SIZE").value_or(-1));
  const std::string addr = env::get("DCOMM_MASTER_ADDR").value_or("127.0.0.1");
  const auto port = static_cast<uint16_t>(env::get_int("DCOMM_MASTER_PORT").value_or(0));
  if (rank < 0 || size < 2 || port == 0) {
    throw InvalidUsageError("ucx_peer: run it through dcomm-run with at least 2 ranks");
  }
  if (rank == 0 && !env::get_bool("DCOMM_STORE_HOSTED", false)) server = start_tcp_store_server(addr, port);
  // Every launch hosts a fresh store, so one fixed prefix serves (and launchers on several nodes agree on it).
  auto store = make_prefix_store("ucx_peer/", connect_tcp_store(addr, port));
  transport::PeerInfo self;
  self.rank = rank;
  self.local_rank = static_cast<int>(env::get_int("DCOMM_LOCAL_RANK", 0));
  self.node_rank = static_cast<int>(env::get_int("DCOMM_NODE_RANK", 0));
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  self.hostname = host;
  self.host_id = env::get("DCOMM_HOST_ID").value_or(self.hostname);
  self.pid = static_cast<int>(::getpid());
  transport::MeshOptions options;
  options.timeout = std::chrono::seconds(60);
  return transport::Mesh::create(store, self, size, options);
}

}  // namespace dcomm::test

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    std::unique_ptr<dcomm::TcpStoreServer> server;
    auto mesh = dcomm::test::join_mesh(server);
    int rc = 2;
    if (mode == "pingpong") rc = dcomm::test::peer_pingpong(*mesh);
    if (mode == "kill") rc = dcomm::test::peer_kill(*mesh);
    if (mode == "bench") rc = dcomm::test::peer_bench(*mesh, argc > 2 ? std::atoi(argv[2]) : 10000);
    if (rc == 2) std::fprintf(stderr, "usage: ucx_peer pingpong|kill|bench [iterations]\n");
    mesh->close();
    std::fflush(stdout);
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ucx_peer %s: %s\n", mode.c_str(), e.what());
    return 1;
  }
}
