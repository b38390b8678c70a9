#pragma once
// "did you mean --nproc-per-node?" for a mistyped option.

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace dcomm::run {

/// Every long option of the parser, as "--name".
std::vector<std::string> option_names(const CLI::App& app);

/// The known option nearest to `typed` (edit distance, at most a third of its length), or "" when none is near.
std::string nearest_option(const std::string& typed, const std::vector<std::string>& known);

/// "unknown option '--nproc-per-nod'; did you mean --nproc-per-node? (options go before --, the program after)".
std::string unknown_option_message(const std::string& word, const std::vector<std::string>& known);

}  // namespace dcomm::run
