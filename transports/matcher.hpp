#pragma once
// The matching lists of Mesh: receives posted before their message (posted) and messages announced before
// their receive (unexpected). Both are FIFO and scanned from the front, which keeps matching in order per
// (source, tag) because every transport announces a peer's messages in the order the peer sent them.
// Not thread-safe: Mesh calls it under its lock.

#include <deque>
#include <optional>

#include "transports/mesh.hpp"

namespace dcomm::transport {

class Matcher {
 public:
  /// A message whose receive was not posted yet, with the transport that holds its payload.
  struct Unexpected {
    Transport* transport = nullptr;
    Incoming msg;
  };

  /// A message arrived: returns the first posted receive that matches it (removed from the list), or null after
  /// keeping the message as unexpected.
  RequestPtr arrived(Transport& from, const Incoming& msg);
  /// A receive is posted: returns the first unexpected message it matches (removed from the list), or nothing
  /// after appending the receive to the posted list.
  std::optional<Unexpected> post(const RequestPtr& recv);
  /// Removes a posted receive; false when it is not in the list (already matched).
  bool withdraw(const Request& recv);
  /// Empties both lists (at close), returning what they held.
  std::deque<RequestPtr> take_posted();
  std::deque<Unexpected> take_unexpected();

  std::size_t posted_count() const { return posted_.size(); }
  std::size_t unexpected_count() const { return unexpected_.size(); }

  static bool matches(int want_source, uint64_t want_tag, int source, uint64_t tag) {
    return (want_source == kAnySource || want_source == source) && want_tag == tag;
  }

 private:
  std::deque<RequestPtr> posted_;
  std::deque<Unexpected> unexpected_;
};

}  // namespace dcomm::transport
