#include "transports/peer_table.hpp"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include <dcomm/error.hpp>

namespace dcomm::transport {

bool PeerRecord::has(const std::string& name) const {
  return std::find(transports.begin(), transports.end(), name) != transports.end();
}

PeerInfo local_peer_info(int rank, int local_rank, int node_rank, std::string host_id) {
  PeerInfo p;
  p.rank = rank;
  p.local_rank = local_rank;
  p.node_rank = node_rank;
  p.host_id = std::move(host_id);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  p.hostname = host;
  p.pid = static_cast<int>(::getpid());
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) p.cpus.push_back(c);
    }
  }
  return p;
}

Store::Bytes encode_peer(const PeerRecord& rec) {
  nlohmann::json j = {{"rank", rec.info.rank},         {"local_rank", rec.info.local_rank},
                      {"node_rank", rec.info.node_rank}, {"host_id", rec.info.host_id},
                      {"hostname", rec.info.hostname}, {"pid", rec.info.pid},
                      {"cpus", rec.info.cpus},
                      {"transports", rec.transports}};
  std::string s = j.dump();
  return Store::Bytes(s.begin(), s.end());
}

PeerRecord decode_peer(const Store::Bytes& bytes, const std::string& key) {
  try {
    auto j = nlohmann::json::parse(bytes.begin(), bytes.end());
    PeerRecord rec;
    rec.info.rank = j.at("rank").get<int>();
    rec.info.local_rank = j.at("local_rank").get<int>();
    rec.info.node_rank = j.at("node_rank").get<int>();
    rec.info.host_id = j.at("host_id").get<std::string>();
    rec.info.hostname = j.at("hostname").get<std::string>();
    rec.info.pid = j.at("pid").get<int>();
    rec.info.cpus = j.value("cpus", std::vector<int>{});
    rec.transports = j.at("transports").get<std::vector<std::string>>();
    return rec;
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kInternal,
                fmt::format("mesh setup: store key '{}' does not hold a peer record ({}); is the store shared with "
                            "another job that uses the same keys?",
                            key, e.what()));
  }
}

}  // namespace dcomm::transport
