#pragma once
// The collectives layer's one entry point for the runtime: an Engine per process group that validates a call,
// checks it matches the other ranks' calls, picks an algorithm (forced, or by the cost model) and runs it.

#include <atomic>
#include <cstdint>
#include <dcomm/process_group.hpp>
#include <dcomm/types.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.hpp"
#include "transports/mesh.hpp"

namespace dcomm::coll {

/// One collective call, as the process group received it. Counts and displacements are in elements.
/// `send.data == recv.data` means in place. broadcast uses `send` as its buffer; barrier uses no buffers.
/// v-variants: scatterv reads send_counts/send_displs (on the root), gatherv recv_counts/recv_displs (on the
/// root), all_to_all_v all four; empty displs mean blocks packed in rank order.
struct Args {
  Collective coll = Collective::kAllReduce;
  Buffer send;
  Buffer recv;
  Reduction red;
  int root = 0;
  bool vector_variant = false;  ///< scatterv, gatherv, all_to_all_v
  std::vector<std::size_t> send_counts, send_displs;
  std::vector<std::size_t> recv_counts, recv_displs;
  /// Where run() stores the name of the algorithm it chose (the flight recorder's slot), or null.
  std::atomic<const char*>* chosen_algorithm = nullptr;
};

/// broadcast, reduce, scatter and gather: the collectives with a root.
inline bool rooted(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kScatter ||
         c == Collective::kGather;
}

class SlotChannel;
struct Hierarchy;

/// A group as a view of the world's mesh: group rank i is world rank world_ranks[i].
struct GroupView {
  std::shared_ptr<transport::Mesh> mesh;
  int rank = 0;
  int size = 1;
  std::vector<int> world_ranks;
  uint32_t context = 0;  ///< the group's tag space (< 4096)
  /// The group's shared-memory slots (collectives/slots.hpp), set by Engine::create on groups of one node.
  std::shared_ptr<SlotChannel> slots;
  /// Its nodes and the sub-views of them (collectives/topology.hpp); Engine::create builds it.
  std::shared_ptr<const Hierarchy> hierarchy;
};

/// Each message between GPUs costs ~25 us (an IPC export, the peer's copy and the completion's poll: measured on
/// an H100 in 2026-11, docs/cuda.md), where 8 MiB more of a copy costs ~3 us: device calls pipeline in pieces this
/// large (host calls in 512 KiB, which would make a 16 MiB device all_reduce[ring] 5x slower).
inline constexpr std::size_t kDefaultDeviceChunkBytes = std::size_t{8} << 20;

/// Whether this rank's call is a device call: a buffer of it (send or receive, empty or not) is labelled with a
/// device. The engine's piece size, the cost model's prices and the call check's `device` field all follow it, so
/// a rank whose one side is an empty default Buffer still counts as on the device with its ranks.
bool on_device(const Args& args);
/// Whether this rank cuts the call in device pieces (kDefaultDeviceChunkBytes): a device call that is not a
/// v-variant (a rank of a v-variant with nothing to move passes only empty buffers, which resolve to host memory,
/// and must cut as its peers do). The engine's piece size and the call check's `device` field both follow it.
bool device_pieces(const Args& args);

struct EngineOptions {
  std::size_t chunk_bytes = 0;  ///< pipelining chunk; 0: DCOMM_CHUNK_BYTES, else the default
  /// Pipelining chunk of calls on device buffers; 0: DCOMM_DEVICE_CHUNK_BYTES, else kDefaultDeviceChunkBytes.
  std::size_t device_chunk_bytes = 0;
  bool check_calls = true;      ///< exchange a call descriptor to catch mismatched calls
};

class Engine {
 public:
  /// May probe the links (a short collective exchange over `view`) to fit the cost model.
  static std::unique_ptr<Engine> create(const GroupView& view, const EngineOptions& opts = {});
  virtual ~Engine() = default;

  /// Runs one collective. `seq` numbers the group's collectives (every rank issues the same sequence).
  /// `algorithm` empty: the forced one for this collective, else the cost model's choice.
  ///
  /// A call this rank cannot run - a caller mistake (bad root, null buffer with a non-zero count, an op that does
  /// not fit the dtype, sizes that disagree or whose bytes overflow), an unknown or unfit algorithm name, the
  /// engine's scratch memory that cannot be allocated, or `problem` found by the caller - moves no data, yet
  /// still takes its turn in the call check marked invalid: every rank then throws the same InvalidUsageError
  /// naming this rank and the reason, and call `seq` is used up alike everywhere. With the check off
  /// (DCOMM_CHECK_CALLS=0) this rank throws alone; the others' call `seq` waits for it and fails by timeout, and
  /// never pairs with a later call.
  virtual void run(const Args& args, const std::string& algorithm, const Deadline& deadline, uint64_t seq,
                   std::string_view problem = {}) = 0;
  virtual void set_algorithm(Collective c, const std::string& name) = 0;
  virtual std::string explain(Collective c, std::size_t bytes, Device device = Device::host()) const = 0;
};

}  // namespace dcomm::coll
