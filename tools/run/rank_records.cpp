#include "tools/run/rank_records.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/mman.h>

#include "rendezvous/failure_record.hpp"
#include "tools/run/signals.hpp"

namespace dcomm::run {
namespace {

constexpr Duration kConnectTimeout = std::chrono::seconds(5);

}  // namespace

std::shared_ptr<Store> connect_rank_store(const std::string& addr, int port, TcpStoreOptions opts) noexcept {
  try {
    opts.timeout = kConnectTimeout;
    return connect_tcp_store(addr, static_cast<uint16_t>(port), opts);
  } catch (const std::exception&) {
    return nullptr;
  }
}

RankRecords::RankRecords(std::shared_ptr<Store> store, const RoundInfo& round) {
  if (store) store_ = make_prefix_store(fmt::format("{}/{}/", round.run_id, round.restart_count), std::move(store));
}

void RankRecords::rank_failed(const RankExit& e) noexcept {
  if (!store_ || e.rank < 0 || e.stopped) return;
  if (e.signaled) {
    publish(e);
  } else {
    pending_.emplace_back(Clock::now() + kExitCodeDelay, e);
  }
}

void RankRecords::flush_pending() noexcept {
  auto now = Clock::now();
  std::erase_if(pending_, [&](const auto& p) {
    if (p.first > now) return false;
    publish(p.second);
    return true;
  });
}

Clock::time_point RankRecords::next_pending() const noexcept {
  Clock::time_point next = Clock::time_point::max();
  for (const auto& p : pending_) next = std::min(next, p.first);
  return next;
}

std::optional<int> RankRecords::root_rank() noexcept {
  if (!store_) return std::nullopt;
  auto root = rdzv::read_failure(*store_);
  if (!root) return std::nullopt;
  return root->rank;
}

void RankRecords::publish(const RankExit& e) noexcept {
  rdzv::FailureRecord r;
  r.rank = e.rank;
  r.pid = e.pid;
  r.host = e.host;
  r.what = e.signaled ? fmt::format("was killed by signal {} {}", e.code, describe_signal(e.code))
                      : fmt::format("exited with code {}", e.code);
  r.reporter = "dcomm-run";
  rdzv::publish_failure(*store_, r);
  // Every death, not only the first: a shrinking group reads them to leave the dead out without waiting
  // (runtime/shrink.cpp).
  try {
    store_->set(fmt::format("failure/dead/{}", e.rank), rdzv::encode_failure(r));
  } catch (const std::exception&) {
  }
}

std::vector<std::string> RankRecords::shrinks() noexcept {
  std::vector<std::string> out;
  if (!store_) return out;
  try {
    int64_t n = store_->add("shrink/count", 0);
    for (int64_t i = 1; i <= n; ++i) out.push_back(store_->get_string(fmt::format("shrink/{}", i)));
  } catch (const std::exception&) {
  }
  return out;
}

void RankRecords::rank_stopped(int rank, int sig) noexcept {
  if (!store_) return;
  try {
    std::string key = fmt::format("launcher/stopped/{}", rank);
    if (sig == 0) {
      store_->delete_key(key);
    } else {
      store_->set(key, fmt::format("stopped by signal {} {}", sig, describe_signal(sig)));
    }
  } catch (const std::exception&) {
  }
}

std::optional<std::string> RankRecords::flight_report() noexcept {
  if (!store_) return std::nullopt;
  try {
    if (!store_->check({"fr/report"})) return std::nullopt;
    return store_->get_string("fr/report");
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<std::pair<int, std::string>> RankRecords::hang_culprit() noexcept {
  if (!store_) return std::nullopt;
  auto root = rdzv::read_failure(*store_);
  if (!root || !root->timeout) return std::nullopt;
  return std::make_pair(root->rank, fmt::format("{} (seen by {})", root->what, root->reporter));
}

std::vector<std::string> remove_leftover_segments(const std::string& run_id, const std::vector<int>& pids) noexcept {
  std::vector<std::string> removed;
  try {
    // Transport segments: "/dcomm-<run id>-..." (transports/mesh_create.cpp); collectives' windows:
    // "/dcomm-coll-<pid>-..." (collectives/shm_segments.cpp).
    std::vector<std::string> prefixes{fmt::format("dcomm-{}-", run_id)};
    for (int pid : pids) prefixes.push_back(fmt::format("dcomm-coll-{}-", pid));
    DIR* dir = ::opendir("/dev/shm");
    if (dir == nullptr) return removed;
    while (dirent* e = ::readdir(dir)) {
      std::string name = e->d_name;
      for (const auto& p : prefixes) {
        if (name.rfind(p, 0) == 0 && ::shm_unlink(("/" + name).c_str()) == 0) {
          removed.push_back(name);
          break;
        }
      }
    }
    ::closedir(dir);
  } catch (const std::exception&) {
  }
  return removed;
}

}  // namespace dcomm::run
