#pragma once
// What one process publishes when it joins (its declared identity, or the error that keeps it from joining),
// and the pure rule that turns every member's record into complete identities. Every process applies the rule
// to the same records, so all of them reach the same identities or fail with the same message.

#include <dcomm/init.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dcomm::rdzv {

struct Member {
  int pid = 0;
  std::string hostname;
  uint64_t nonce = 0;   // random per process: makes the record unique and, from the first member, the world id
  Identity declared;    // what options and the environment gave; -1 where nothing did
  std::string error;    // this process's own configuration error, published so its peers fail with it

  /// "pid 123 on host a", for messages.
  std::string describe() const;
};

/// The record this process publishes: its pid, hostname, a fresh random nonce, and declared identity.
Member make_member(const Identity& declared, const std::string& error);

std::string encode_member(const Member& m);
/// Throws Error(kRemoteError) naming the key when the record is not one encode_member wrote.
Member decode_member(const std::string& text, const std::string& key);

/// A conflict visible among the first records already (a member's error, disagreeing world sizes, a rank
/// claimed twice), so that processes fail at once instead of waiting for the rest. nullopt: none yet.
std::optional<std::string> early_conflict(const std::vector<Member>& members);

/// Completes everyone's identity from all world_size records (in join order): ranks in join order unless
/// declared; node ranks by host id in order of first appearance by rank unless declared; local ranks dense per
/// node by rank unless declared; local_world_size and node_count counted. Throws InvalidUsageError naming the
/// conflicting values and processes.
std::vector<Identity> assign_identities(const std::vector<Member>& members);

}  // namespace dcomm::rdzv
