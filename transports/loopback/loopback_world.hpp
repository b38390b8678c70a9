#pragma once
// The process-wide directory of loopback endpoints: ranks of one world (one TransportContext::world_id) that
// are threads of this process find each other's inboxes here.

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transports/transport.hpp"

namespace dcomm::transport::loopback {

/// One message in a rank's inbox. Small ones carry a copy (the send completed at once); large ones carry the
/// sender's pointer, and the receiver copies straight from it and then completes the sender's op.
struct Message {
  int source = -1;
  uint64_t tag = 0;
  std::size_t bytes = 0;
  std::vector<char> eager;
  const void* src = nullptr;
  OpPtr send_op;  ///< null for eager messages
};

/// One rank's inbox. Every sender appends under `mu`; only the owner drains it.
struct Endpoint {
  std::mutex mu;
  std::deque<Message> inbox;
  bool closed = false;
};

/// Registers this rank's endpoint; throws InvalidUsageError when the rank is already registered in the world.
std::shared_ptr<Endpoint> register_endpoint(const std::string& world_id, int rank);
/// The endpoint of `rank` in `world_id`, or null while it has not registered.
std::shared_ptr<Endpoint> find_endpoint(const std::string& world_id, int rank);
void unregister_endpoint(const std::string& world_id, int rank) noexcept;

}  // namespace dcomm::transport::loopback
