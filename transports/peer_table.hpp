#pragma once
// What every rank publishes about itself during Mesh setup: its PeerInfo and the transports it created, so a
// peer picks a transport both sides have.

#include <string>
#include <vector>

#include <dcomm/store.hpp>

#include "transports/transport.hpp"

namespace dcomm::transport {

struct PeerRecord {
  PeerInfo info;
  std::vector<std::string> transports;  ///< names, highest priority first

  bool has(const std::string& name) const;
};

/// This process's PeerInfo: the given ranks and host id, with its hostname and pid.
PeerInfo local_peer_info(int rank, int local_rank, int node_rank, std::string host_id);

Store::Bytes encode_peer(const PeerRecord& rec);
/// Throws Error naming the key when the value is not a peer record (a store shared with something else).
PeerRecord decode_peer(const Store::Bytes& bytes, const std::string& key);

}  // namespace dcomm::transport
