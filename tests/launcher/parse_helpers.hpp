#pragma once
// dcomm-run's command line parsed from a list of words, for the unit tests.

#include <string>
#include <vector>

#include "tools/run/options.hpp"

namespace dcomm::run::test {

inline LaunchOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "dcomm-run");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_command_line(static_cast<int>(argv.size()), argv.data()).options;
}

/// The UsageError's text, or "(accepted)".
inline std::string parse_error(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace dcomm::run::test
