// Whom a failed wait blames. A rank sees only its own peers, and often only a symptom of the real failure: a
// survivor that closed its transport because it failed first, a UCX endpoint error from a peer that exited in
// reaction to another's death. So the first certain knowledge is recorded once in the store
// (rendezvous/failure_record.hpp), and every failing rank names that rank first, then what it saw itself:
//   certain: a peer process on this host has exited (the process table says so), or dcomm-run saw it die;
//   symptom: a peer closed its transport, or the transport reports the peer unreachable while its process lives.
#include <fmt/format.h>

#include "common/process.hpp"
#include "transports/mesh_impl.hpp"

namespace dcomm::transport {

void MeshImpl::record_exit_locked(int p, const std::string& why) {
  if (!options_.failure_store || p == rank_) return;
  const PeerInfo& info = peers_[static_cast<std::size_t>(p)];
  if (info.host_id != peers_[static_cast<std::size_t>(rank_)].host_id) return;
  if (local_process_state(info.pid) != ProcessState::kExited) return;
  rdzv::FailureRecord rec;
  rec.rank = p;
  rec.pid = info.pid;
  rec.host = info.hostname;
  rec.what = fmt::format("exited (its {} transport: {})", route(p)->name(), why);
  rec.reporter = fmt::format("rank {}", rank_);
  rdzv::publish_failure(*options_.failure_store, rec);
}

std::optional<rdzv::FailureRecord> MeshImpl::root_cause() {
  if (!options_.failure_store) return std::nullopt;
  auto root = rdzv::read_failure(*options_.failure_store);
  if (!root || root->rank == rank_ || root->rank < 0 || root->rank >= size()) return std::nullopt;
  return root;
}

std::string MeshImpl::blame_text(const rdzv::FailureRecord& root, const std::string& seen) {
  std::string out = fmt::format("rank {} failed first: {}", root.rank, root.describe());
  if (!seen.empty()) out += fmt::format("; this rank then saw: {}", seen);
  return out;
}

std::optional<MeshImpl::Blame> MeshImpl::blame_locked(const Request& r) {
  if (closed_) return std::nullopt;
  // Every failed peer is named: for an any-source receive, the first one found may only have closed in
  // reaction to the real cause, another rank's death.
  std::string seen;
  int first = -1;
  for (int p = 0; p < size(); ++p) {
    if (p == rank_ || (r.peer != kAnySource && p != r.peer)) continue;
    std::string why = route(p)->peer_failure(p);
    if (why.empty()) continue;
    record_exit_locked(p, why);
    if (first < 0) first = p;
    seen.append(seen.empty() ? "" : "; ").append(fmt::format("rank {} is gone: {}", p, why));
  }
  if (auto root = root_cause()) {
    return Blame{root->timeout ? ErrorCode::kTimeout : ErrorCode::kRemoteError, blame_text(*root, seen), root->rank};
  }
  if (seen.empty()) return std::nullopt;
  return Blame{ErrorCode::kRemoteError, seen, first};
}

std::string MeshImpl::explain_op_failure(const Request& r, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (r.peer != kAnySource && r.peer != rank_) record_exit_locked(r.peer, error);
  auto root = root_cause();
  if (!root || root->rank == r.peer) return error;
  return blame_text(*root, error);
}

}  // namespace dcomm::transport
