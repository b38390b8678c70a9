#include "rendezvous/failure_record.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include <dcomm/error.hpp>

namespace dcomm::rdzv {
namespace {

// How often a startup wait looks for a recorded failure: a dead rank is named this soon after dcomm-run saw it.
constexpr Duration kWatchSlice = std::chrono::milliseconds(200);

}  // namespace

std::string FailureRecord::describe() const {
  std::string where = pid > 0 ? fmt::format(" (pid {} on host {})", pid, host) : std::string();
  return fmt::format("rank {}{} {} (seen by {})", rank, where, what, reporter);
}

std::string encode_failure(const FailureRecord& r) {
  nlohmann::json j = {{"rank", r.rank},         {"pid", r.pid},           {"host", r.host},
                      {"what", r.what},         {"reporter", r.reporter}, {"timeout", r.timeout}};
  return j.dump();
}

std::optional<FailureRecord> decode_failure(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("rank")) return std::nullopt;
  FailureRecord r;
  r.rank = j.value("rank", -1);
  r.pid = j.value("pid", 0);
  r.host = j.value("host", std::string());
  r.what = j.value("what", std::string());
  r.reporter = j.value("reporter", std::string());
  r.timeout = j.value("timeout", false);
  return r;
}

std::optional<FailureRecord> publish_failure(Store& store, const FailureRecord& r) noexcept {
  try {
    std::string mine = encode_failure(r);
    Store::Bytes held = store.compare_set(kFailureKey, {}, Store::Bytes(mine.begin(), mine.end()));
    return decode_failure(std::string(held.begin(), held.end()));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<FailureRecord> read_failure(Store& store) noexcept {
  try {
    if (!store.check({kFailureKey})) return std::nullopt;
    return decode_failure(store.get_string(kFailureKey));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void wait_watching_failures(Store& store, const std::vector<std::string>& keys, const Deadline& deadline,
                            const FailureWatch& watch, const std::string& what) {
  if (watch.store == nullptr) {
    store.wait(keys, std::max(Duration(1), deadline.remaining()));
    return;
  }
  for (;;) {
    try {
      store.wait(keys, std::max(Duration(1), std::min(kWatchSlice, deadline.remaining())));
      return;
    } catch (const TimeoutError&) {
      if (auto f = read_failure(*watch.store); f && f->rank != watch.self) {
        throw RemoteError(fmt::format("{}: rank {} failed first: {}; gave up waiting after {}; check rank {}'s log",
                                      what, f->rank, f->describe(), format_duration(deadline.elapsed()), f->rank));
      }
      if (deadline.expired()) throw;
    }
  }
}

}  // namespace dcomm::rdzv
