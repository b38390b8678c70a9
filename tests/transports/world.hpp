#pragma once
// Runs a body on every rank of an in-process world (ranks are threads) over one transport, and collects the
// failures the ranks recorded so that only the main thread asserts.

#include <functional>
#include <string>
#include <vector>

#include "tests/transports/conformance.hpp"

namespace dcomm::test {

using RankBody = std::function<void(transport::Mesh& mesh, RankLog& log)>;

/// Adjusts the options every rank's Mesh is created with (a stager, say).
using MeshTweak = std::function<void(transport::MeshOptions& options)>;

/// Creates a Mesh per rank over `transport` and runs `body` on each; returns every failure as "rank r: ...".
std::vector<std::string> run_world(const std::string& transport, int world_size, const RankBody& body,
                                   const MeshTweak& tweak = {});

/// The names of the transports this build has that can join ranks that are threads of one process.
std::vector<std::string> in_process_transports();

}  // namespace dcomm::test
