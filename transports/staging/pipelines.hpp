#pragma once
// The two halves of a staged message, each a ring of Stager slots:
//
//   sender:   [to_host chunk 0][to_host chunk 1][to_host chunk 2] ...     Download
//                              [send chunk 0]   [send chunk 1]    ...     (StagedTransport, over the host transport)
//   receiver:                  [recv chunk 0]   [recv chunk 1]    ...     (StagedTransport, over the host transport)
//                                               [to_device chunk 0] ...   Upload
//
// Chunk i of a message of n bytes is bytes [i * chunk, min(n, (i + 1) * chunk)). Nothing here blocks: calls poll
// the slots' copies and return.

#include <cstddef>
#include <memory>
#include <vector>

#include "transports/staging/stager.hpp"

namespace dcomm::transport::staging {

inline std::size_t chunk_count(std::size_t bytes, std::size_t chunk) { return (bytes + chunk - 1) / chunk; }
inline std::size_t chunk_size(std::size_t index, std::size_t bytes, std::size_t chunk) {
  return index * chunk >= bytes ? 0 : (bytes - index * chunk < chunk ? bytes - index * chunk : chunk);
}

/// A chunk on the host, ready to send.
struct HostChunk {
  std::size_t index = 0;
  const void* data = nullptr;
  std::size_t bytes = 0;
};

/// Sender side: copies device memory at `src` into slots, at most depth() chunks ahead of the sends.
class Download {
 public:
  Download(Stager& stager, const Device& device, const void* src, std::size_t bytes);
  /// The next chunk, in order, once its copy has finished; false while it is still being copied, or when every
  /// chunk was handed out.
  bool ready(HostChunk* out);
  /// The host transport is done with chunk `index`: its slot takes the next copy.
  void sent(std::size_t index);
  bool done() const { return sent_ == chunks_; }
  std::size_t chunks() const { return chunks_; }
  std::size_t handed_out() const { return next_ready_; }

 private:
  void start_copies();
  const char* src_;
  std::size_t bytes_, chunk_, chunks_;
  std::size_t next_copy_ = 0, next_ready_ = 0, sent_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<bool> busy_;  ///< per slot: holds a chunk not yet sent
};

/// Receiver side: lends slots to receive chunks into, and copies each received chunk to `dst` on the device.
class Upload {
 public:
  Upload(Stager& stager, const Device& device, void* dst, std::size_t bytes);
  /// Where chunk `index` may be received (room for its chunk_size), or null while that slot still holds an earlier
  /// chunk. Chunks are lent in order: `index` must be the next one not lent yet.
  void* lend(std::size_t index);
  /// Chunk `index` is in its slot: queue its copy to the device.
  void filled(std::size_t index);
  /// Polls the copies; true once every chunk is in `dst`.
  bool done();
  std::size_t chunks() const { return chunks_; }
  std::size_t lent() const { return lent_; }

 private:
  char* dst_;
  std::size_t bytes_, chunk_, chunks_;
  std::size_t lent_ = 0, filled_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<bool> held_;  ///< per slot: lent and not yet filled
};

}  // namespace dcomm::transport::staging
