#pragma once
// Messages a rank sends to itself. Mesh routes them here rather than through a transport so that every world,
// even one rank with no transport at all, can send to itself. Every message is copied at isend (eager), so a
// rank may send to itself and wait for the send before it posts the receive, as collectives do.

#include <map>
#include <vector>

#include "transports/transport.hpp"

namespace dcomm::transport {

class SelfChannel final : public Transport {
 public:
  explicit SelfChannel(int rank) : rank_(rank) {}

  const char* name() const override { return "self"; }
  void publish(Store&) override {}
  bool can_connect(const PeerInfo& self, const PeerInfo& peer) const override { return self.rank == peer.rank; }
  void connect(Store&, const std::vector<PeerInfo>&, const Deadline&) override {}
  void isend(int peer, uint64_t tag, const void* data, std::size_t bytes, const Device& device, OpPtr op) override;
  bool progress(ArrivalSink& sink) override;
  void receive(const Incoming& msg, void* dst, const Device& device, OpPtr op) override;
  void discard(const Incoming& msg) override { held_.erase(msg.token); }
  std::string peer_failure(int) override { return {}; }
  void close() noexcept override {
    fresh_.clear();
    held_.clear();
  }

 private:
  struct Message {
    uint64_t tag = 0;
    std::vector<char> payload;
  };
  int rank_;
  uint64_t next_token_ = 1;
  std::vector<std::pair<uint64_t, Message>> fresh_;  ///< sent, not announced yet
  std::map<uint64_t, Message> held_;                 ///< announced, waiting for receive() or discard()
};

}  // namespace dcomm::transport
