#pragma once
// Which of the build's algorithms a group can run: explain() lists the others (the hierarchical ones on a group on
// one node, shm_direct on a group across nodes) as "(not for this group)".

#include <dcomm/dcomm.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace dcomm::test {

inline bool unfit_for_group(const ProcessGroup& pg, Collective c, const std::string& name) {
  std::istringstream lines(pg.explain(c, 1024));
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("  " + name + " ") && line.ends_with("(not for this group)")) return true;
  }
  return false;
}

inline std::vector<std::string> algorithms_for_group(const ProcessGroup& pg, Collective c) {
  std::vector<std::string> out;
  for (const std::string& name : algorithms(c)) {
    if (!unfit_for_group(pg, c, name)) out.push_back(name);
  }
  return out;
}

}  // namespace dcomm::test
