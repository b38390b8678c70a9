// dcomm::algorithms(): the public view of the collectives layer's algorithm table.

#include <dcomm/process_group.hpp>

#include "collectives/registry.hpp"

namespace dcomm {

std::vector<std::string> algorithms(Collective c) {
  std::vector<std::string> names;
  for (const coll::Algorithm* a : coll::algorithms_for(c)) names.emplace_back(a->name);
  return names;
}

}  // namespace dcomm
