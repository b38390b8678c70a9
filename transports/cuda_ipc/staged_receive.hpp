#pragma once
// The receiver's side of staged messages (the protocol is in staged_send.hpp): receive() registers the destination
// and sends kGo; each kChunk is copied out of the sender's staging buffer (opened once through the import cache)
// into the destination on the copy engine's stream; every finished chunk returns its slot (kSlotFree), and the
// last one completes the receive and acks the message like a direct one.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <utility>

#include "transports/cuda_ipc/copy_engine.hpp"
#include "transports/cuda_ipc/ipc_memory.hpp"
#include "transports/cuda_ipc/staged_send.hpp"

namespace dcomm::transport::cuda_ipc {

class StagedReceiver {
 public:
  StagedReceiver(int self_rank, PostRecord post, ImportCache& imports, CopyEngine& copies);
  ~StagedReceiver() { close(); }
  StagedReceiver(const StagedReceiver&) = delete;
  StagedReceiver& operator=(const StagedReceiver&) = delete;

  /// receive() of a kStaged message: `bytes` go to `dst` through copies on `device`; `op` completes when they are
  /// there. Sends kGo to the sender.
  void start(int peer, uint64_t seq, void* dst, std::size_t bytes, int device, OpPtr op);
  /// A kChunk: queues its copy out of the staging slot, or returns the slot at once when the receive is gone
  /// (failed, or cancelled by the sender). A copy that cannot be queued fails the receive.
  void chunk(int peer, const ControlRecord& rec);
  /// The copy engine finished a chunk's copy; `error` is set when it failed (already named as the transport wants).
  void copied(const FinishedCopy& f, std::exception_ptr error);
  /// kCancel: the sender could not stage the message; the receive fails naming it.
  void cancel(int peer, uint64_t seq);
  /// Fails receives still waiting for chunks with AbortedError; posts nothing. Never throws.
  void close() noexcept;

 private:
  struct Receive {
    char* dst;
    std::size_t bytes;
    int device;
    OpPtr op;
    std::size_t copied = 0;
    int in_flight = 0;
  };
  using Key = std::pair<int, uint64_t>;  // (peer, seq)

  void finish(const Key& key, std::exception_ptr error);
  void free_slot(int peer, uint64_t offset);

  int self_;
  PostRecord post_;
  ImportCache& imports_;
  CopyEngine& copies_;
  std::map<Key, Receive> receives_;
};

}  // namespace dcomm::transport::cuda_ipc
