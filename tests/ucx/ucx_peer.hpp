#pragma once
// ucx_peer: the program the multi-process ucx tests and the measurement launch through dcomm-run.
//   ucx_peer pingpong      ranks 0 and 1 exchange every size (0 B to 16 MiB), any-source on rank 0; exits 0 when
//                          every byte arrived as sent and the route was ucx
//   ucx_peer kill          rank 1 dies by SIGKILL while rank 0's 256 MiB send to it is in flight; rank 0 prints
//                          "SURVIVOR <seconds> <error>" and exits 0 when its pending op failed naming rank 1
//   ucx_peer bench [iters] 8-byte ping-pong latency and 16 MiB bandwidth between ranks 0 and 1, printed by rank 0
// Ranks come from dcomm-run's environment; the transport from DCOMM_TRANSPORT.

#include <memory>
#include <string>

#include <dcomm/store.hpp>

#include "transports/mesh.hpp"

namespace dcomm::test {

/// Joins the world dcomm-run started and builds its mesh; `server` keeps the store alive when this rank hosts it.
std::shared_ptr<transport::Mesh> join_mesh(std::unique_ptr<TcpStoreServer>& server);

int peer_pingpong(transport::Mesh& mesh);
int peer_kill(transport::Mesh& mesh);
int peer_bench(transport::Mesh& mesh, int iterations);

}  // namespace dcomm::test
