#include "tools/run/suggest.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>

namespace dcomm::run {
namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& name : opt->get_lnames()) out.push_back("--" + name);
  }
  return out;
}

std::string nearest_option(const std::string& typed, const std::vector<std::string>& known) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(1, typed.size() / 3) + 1;
  for (const auto& name : known) {
    std::size_t d = edit_distance(typed, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  return best;
}

std::string unknown_option_message(const std::string& word, const std::vector<std::string>& known) {
  const std::string name = word.substr(0, word.find('='));
  std::string near = nearest_option(name, known);
  return fmt::format("unknown option '{}'{} (options go before the program; put the program after --)", name,
                     near.empty() ? "" : fmt::format("; did you mean {}?", near));
}

}  // namespace dcomm::run
