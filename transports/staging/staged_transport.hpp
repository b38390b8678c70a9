#pragma once
// StagedTransport wraps a host-only transport (shm, ucx, loopback) so that device buffers can cross it: a device
// send is copied to pinned host chunks (Download) that the inner transport sends one by one, and the receiver copies
// them to the device (Upload), the copy of one chunk overlapping the transfer of the previous ones. Host buffers
// pass straight through, as do device buffers the inner transport moves itself (UCX built with CUDA).
//
// Wire format, per staged message of n > 0 bytes on tag t (all on tag t | kStagedBit, in order):
//   header  24 bytes: magic, version, n, chunk size c
//   chunks  ceil(n / c) messages of c bytes, the last one n mod c (or c)
// Receivers parse this whatever memory they receive into, so every rank wraps its host transports, with or
// without a GPU. Per (peer, tag) the sender issues a staged message's header and chunks before any later send on
// that (peer, tag), so a receiver can take chunks for the oldest open message of that tag, and matching order per
// (source, tag) holds across staged and plain messages. While a header is being read, later arrivals from its
// sender are held back and announced after it, for the same reason.

#include <deque>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transports/staging/pipelines.hpp"
#include "transports/staging/stager.hpp"
#include "transports/transport.hpp"

namespace dcomm::transport::staging {

class StagedTransport final : public Transport, private ArrivalSink {
 public:
  /// `stager` may be null: device buffers are then refused unless `inner` moves them itself, and staged messages
  /// from peers can still be received into host memory.
  StagedTransport(std::unique_ptr<Transport> inner, std::shared_ptr<Stager> stager);
  ~StagedTransport() override { close(); }

  const char* name() const override { return inner_->name(); }
  void publish(Store& store) override { inner_->publish(store); }
  bool can_connect(const PeerInfo& self, const PeerInfo& peer) const override {
    return inner_->can_connect(self, peer);
  }
  void connect(Store& store, const std::vector<PeerInfo>& peers, const Deadline& deadline) override {
    inner_->connect(store, peers, deadline);
  }
  bool supports_device(const Device& d) const override {
    return d.is_host() || inner_->supports_device(d) || (stager_ && stager_->handles(d));
  }
  void isend(int peer, uint64_t tag, const void* data, std::size_t bytes, const Device& device, OpPtr op) override;
  /// Host messages pass straight through, unless a staged send holds up a (peer, tag) or one failed.
  bool send_now(int peer, uint64_t tag, const void* data, std::size_t bytes) override {
    return blocked_.empty() && broken_.empty() && inner_->send_now(peer, tag, data, bytes);
  }
  bool progress(ArrivalSink& sink) override;
  void receive(const Incoming& msg, void* dst, const Device& device, OpPtr op) override;
  void discard(const Incoming& msg) override;
  std::string peer_failure(int peer) override { return inner_->peer_failure(peer); }
  void close() noexcept override;
  void abandon() noexcept override { inner_->abandon(); }

 private:
  struct Header {
    uint32_t magic = 0;
    uint32_t version = 0;
    uint64_t bytes = 0;
    uint64_t chunk = 0;
  };
  /// A send as the caller made it (kept while it waits behind a staged send on its (peer, tag)).
  struct Send {
    int peer = -1;
    uint64_t tag = 0;
    const void* data = nullptr;
    std::size_t bytes = 0;
    Device device;
    OpPtr op;
  };
  /// A device send being staged: its header, then its chunks as the Download hands them out.
  struct StagedSend {
    Send send;
    Header header;
    OpPtr header_op = std::make_shared<Op>();
    std::unique_ptr<Download> download;
    std::deque<std::pair<std::size_t, OpPtr>> chunk_ops;  ///< chunk sends in flight
    bool unblocked = false;                               ///< every chunk issued: later sends may go
    std::exception_ptr error;
  };
  /// A staged message whose header has arrived, from its announcement to its last chunk.
  struct StagedIn {
    enum class State { kUnmatched, kReceiving, kDiscarding };
    int source = -1;
    uint64_t tag = 0;
    std::size_t bytes = 0, chunk = 0, chunks = 0;
    std::size_t arrived = 0;       ///< chunks announced by the inner transport
    std::deque<Incoming> waiting;  ///< announced chunks not pulled yet
    State state = State::kUnmatched;
    char* dst = nullptr;
    Device device;
    OpPtr op;
    std::unique_ptr<Upload> upload;  ///< device destinations the inner transport cannot write
    std::deque<std::pair<std::size_t, OpPtr>> pulls;  ///< chunk receives in flight
    std::size_t pulled = 0, landed = 0;
    bool failed = false;
  };
  /// A plain (host-sent) message received into device memory: into a host buffer, then uploaded in chunks.
  struct Bounce {
    std::vector<char> buf;
    OpPtr recv_op = std::make_shared<Op>();
    std::unique_ptr<Upload> upload;
    Incoming msg;
    OpPtr op;
  };
  struct PeerIn {
    std::unique_ptr<Header> header;  ///< being read, when set
    OpPtr header_op;
    Incoming header_msg;
    std::deque<Incoming> held;                       ///< arrivals behind the header being read
    std::map<uint64_t, std::deque<uint64_t>> open;   ///< per tag, tokens of staged messages expecting chunks
  };

  void arrived(Transport& from, const Incoming& msg) override;
  bool needs_staging(const Device& device, std::size_t bytes) const {
    return !device.is_host() && bytes > 0 && !inner_->supports_device(device);
  }
  void issue(Send s);
  void unblock(int peer, uint64_t tag);
  bool advance(StagedSend& s);
  bool finished(StagedSend& s);
  void route_arrival(int source, PeerIn& p, const Incoming& msg);
  bool finish_header(int source, PeerIn& p);
  void chunk_arrived(PeerIn& p, std::map<uint64_t, std::deque<uint64_t>>::iterator open, const Incoming& msg);
  void require_stager(const Device& device, const char* what, int peer, std::size_t bytes) const;
  bool pump(StagedIn& in);
  void fail_in(StagedIn& in, std::exception_ptr e);
  /// Takes no more chunks of `in`: the ones waiting and the ones still to arrive are discarded.
  void stop_taking(StagedIn& in);
  bool advance(Bounce& b);
  std::exception_ptr annotate(std::exception_ptr e, const std::string& what) const;

  std::unique_ptr<Transport> inner_;
  std::shared_ptr<Stager> stager_;
  ArrivalSink* sink_ = nullptr;  ///< the mesh, while progress() runs
  bool closed_ = false;

  std::list<StagedSend> sends_;
  std::map<std::pair<int, uint64_t>, std::deque<Send>> blocked_;  ///< sends waiting behind a staged one
  std::map<std::pair<int, uint64_t>, std::exception_ptr> broken_;  ///< (peer, tag)s whose staged send failed

  std::map<int, PeerIn> peers_in_;  // a map: inserting never moves the others
  int reading_ = 0;  ///< peers whose header is being read (arrivals from them are held back)
  std::map<uint64_t, std::unique_ptr<StagedIn>> in_;  ///< staged messages announced to the mesh, by token
  uint64_t next_token_ = 1;
  std::list<Bounce> bounces_;  ///< plain messages received into device memory through a host buffer
};

}  // namespace dcomm::transport::staging
