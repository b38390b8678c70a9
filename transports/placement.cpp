#include "transports/placement.hpp"

#include <algorithm>
#include <set>

namespace dcomm::transport {

namespace {

bool overlap(const std::vector<int>& a, const std::vector<int>& b) {
  if (a.empty() || b.empty()) return true;
  return std::any_of(a.begin(), a.end(), [&](int c) { return std::binary_search(b.begin(), b.end(), c); });
}

}  // namespace

bool shares_cores(const std::vector<PeerInfo>& peers, int self) {
  const PeerInfo& me = peers.at(static_cast<std::size_t>(self));
  std::size_t ranks = 0;
  std::set<int> cores;
  for (const PeerInfo& p : peers) {
    if (p.host_id != me.host_id || !overlap(p.cpus, me.cpus)) continue;
    ++ranks;
    cores.insert(p.cpus.begin(), p.cpus.end());
  }
  return ranks > cores.size();
}

bool cores_alone(const std::vector<PeerInfo>& peers, int self) {
  const PeerInfo& me = peers.at(static_cast<std::size_t>(self));
  if (me.cpus.empty()) return false;
  for (std::size_t r = 0; r < peers.size(); ++r) {
    if (static_cast<int>(r) == self || peers[r].host_id != me.host_id) continue;
    if (overlap(peers[r].cpus, me.cpus)) return false;  // an unknown affinity overlaps everything
  }
  return true;
}

bool never_run_together(const PeerInfo& a, const PeerInfo& b) {
  return a.host_id == b.host_id && a.cpus.size() == 1 && b.cpus.size() == 1 && a.cpus[0] == b.cpus[0];
}

bool may_share_core(const PeerInfo& a, const PeerInfo& b) { return a.host_id == b.host_id && overlap(a.cpus, b.cpus); }

}  // namespace dcomm::transport
