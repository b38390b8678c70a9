#pragma once
// dcomm as a measured library: each Case becomes one call on the process group.

#include <dcomm/process_group.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tools/bench/library.hpp"

namespace dcomm::bench {

std::unique_ptr<Library> make_dcomm_library(ProcessGroupPtr pg);

/// The algorithms the collectives layer registers for c (dcomm::algorithms()). Optional so that plan() can also
/// run without a registry (the unit tests' fake groups).
std::optional<std::vector<std::string>> registered_algorithms(Collective c);

}  // namespace dcomm::bench
