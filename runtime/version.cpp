#include <dcomm/dcomm.hpp>

#include "collectives/registry.hpp"
#include "dcomm_config.h"

namespace dcomm {
const char* version() noexcept { return DCOMM_VERSION; }

std::vector<std::string> algorithms(Collective c) {
  std::vector<std::string> names;
  for (const coll::Algorithm* a : coll::algorithms_for(c)) names.emplace_back(a->name);
  return names;
}
}  // namespace dcomm
