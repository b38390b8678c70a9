#pragma once
// Pipelined copies through shared-memory windows, for the collectives that move data (broadcast, all_gather,
// gather, scatter, all_to_all [shm_direct]), and reduce_scatter[shm_direct], which combines what it takes, on a
// group of one node.
//   Each rank's window holds lanes of a few slots, each slot one piece (at most kPipePieceBytes). A producer copies
//   piece k of a block into the next slot of a lane and publishes it by storing the piece's stamp (the lane's running
//   piece count) in the slot's head with release; each consumer of the lane polls that stamp with acquire, copies
//   the piece out and acknowledges it by storing the stamp in its own line of the lane (release). A producer reuses
//   a slot only once every consumer has acknowledged the piece it held last. So the copy in of one piece and the
//   copies out of the pieces before it run at the same time on different cores, instead of copy in, barrier, copy
//   out: each byte is copied twice, at memcpy speed, in parallel - where a single copy by cross-memory attach
//   (process_vm_readv) runs at a fraction of it.
//   Lanes: kOne, one lane every other rank reads (broadcast, all_gather); kPerPeer, lane q read by rank q alone
//   (scatter, gather, all_to_all).
//   The algorithms move their blocks in lockstep, piece index by piece index (at step k every rank publishes its
//   pieces up to k + ahead(), then takes the others' pieces k), which cannot deadlock while ahead() < the slots
//   per lane: the last piece of a slot it publishes into is at most k - 1, which every reader took at an earlier
//   step.
//   Every wait is Mesh::wait_until: bounded by the call's deadline, spinning then yielding (transports/placement),
//   watching the awaited rank's liveness; a dead or stuck peer fails the call with the op, the peer, the piece and
//   its bytes, the elapsed time and the timeout, and poisons the mesh. A slot's head also carries the call's number
//   and the piece's place and size, which the consumer compares with its own call's: calls that disagree (only
//   possible with DCOMM_CHECK_CALLS=0) raise InvalidUsageError instead of copying another call's data.
//   The windows are made on the algorithm's first call on the group (collectives/shm_segments.hpp: every rank or
//   none) and live with the group; the stamps run on across calls, so a call needs no barrier of its own.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "collectives/context.hpp"

namespace dcomm::coll {

class ShmWindows;

/// The largest piece: a piece copied in and copied out stays in the two cores' L2 caches.
inline constexpr std::size_t kPipePieceBytes = std::size_t{256} << 10;

enum class PipeLanes { kOne, kPerPeer };

/// How a producer writes its pieces (ShmPipe::put). kStream, non-temporal stores: the piece goes to memory and the
/// producer reads no line for ownership - the cheaper write, for rows whose busiest rank writes (broadcast, scatter:
/// the root feeds every other rank; all_gather alike). kPlain: the piece stays in the producer's cache, where a
/// reader on the same core takes it at cache speed - the cheaper read, for rows whose busiest rank reads from every
/// other rank, where ranks share cores (reader_bound_stores()).
enum class PipeStores { kStream, kPlain };

/// The stores of a row whose busiest rank reads every other rank's lane (gather, reduce, reduce_scatter,
/// all_to_all): kPlain where ranks share cores (Topology::shares_cores, alike on every rank), kStream elsewhere.
/// Measured (session 17, 3 and 4 ranks on 2 cores, 64 KiB-1 MiB, plain / non-temporal time): reduce[shm_pipe]
/// 0.50-0.70, reduce_scatter[shm_direct] 0.63-0.87, all_to_all[shm_direct] 0.66-0.92, gather[shm_direct] 0.61-0.83
/// (1.04 at 64 KiB on 4 ranks); broadcast and scatter the other way (1.09-1.69, 1.04-1.32). On 2 ranks a core each,
/// plain stores lost at 64-256 KiB for gather, scatter and reduce (1.12-1.55): kept non-temporal there.
PipeStores reader_bound_stores(const Context& c);

/// Runs `instead` (another row's run()) on the whole group from step 1000, above the steps of the pipe's setup:
/// what a row does where ShmPipe::open() returned null.
void run_instead(const Context& c, void (*instead)(Context&));

/// Whether a pipe moves each block in as few pieces as its slot allows rather than in eighths: with a lane per reader
/// where ranks share cores (Topology::shares_cores), where a piece handed between two ranks of one core costs a
/// switch between them. Session 17, 2 runs each, whole / eighths time at 256 KiB and 1 MiB: 4 ranks on 2 cores
/// gather 0.75 / 0.65, reduce 0.68 / 0.95, all_to_all 0.75 / 0.70, scatter 0.89 / 0.80, reduce_scatter 0.85 / 0.87
/// (64 KiB: 0.71 reduce, 0.97-1.00 the others); 3 ranks alike (reduce 64 KiB 0.95-1.0, 128 KiB 0.86-0.90). With one
/// lane (broadcast, all_gather) broadcast lost (1.08-1.12): eighths there.
bool whole_pieces(PipeLanes lanes, bool shared_cores);

/// The pieces a block of `bytes` moves in on a pipe of `size` ranks (ShmPipe::pieces() there), for the cost model.
std::size_t pipe_pieces(PipeLanes lanes, int size, std::size_t bytes, bool shared_cores);

class ShmPipe final : public AlgorithmState {
 public:
  /// Collective (steps below 1000): this algorithm's pipe on the group (kept in Context::state), made on the first
  /// call. Null on every rank when a rank could not create its window (logged; null from then on): the caller
  /// then runs `instead`, from step 1000 (Context::on).
  static ShmPipe* open(const Context& c, PipeLanes lanes, const char* instead);
  ~ShmPipe() override;

  /// The piece a block of `bytes` moves in (the same on every rank): an eighth of the block, 4 KiB-aligned, between
  /// 16 KiB and the slot, so that a block of a few slots still overlaps its copies in and out; the block up to the
  /// slot with whole_pieces().
  std::size_t piece_for(std::size_t bytes) const;
  /// Pieces of a block of `bytes`.
  std::size_t pieces(std::size_t bytes) const { return (bytes + piece_for(bytes) - 1) / piece_for(bytes); }
  /// How many pieces past index k a rank that both publishes and takes (all_gather, all_to_all) may publish before
  /// it takes the others' pieces k: up to a lane's slots less one, the lockstep stays free of deadlock (a slot's
  /// last piece is then one that every reader took at an earlier step), and the readers rarely wait.
  std::size_t ahead() const;
  /// Publishes piece `k` of `block` (`bytes` in all) in the next slot of lane `to` (the reader with kPerPeer;
  /// ignored with kOne) with `stores`, once the slot's last piece has been acknowledged by every reader.
  void put(const Context& c, int to, const char* block, std::size_t bytes, std::size_t k, PipeStores stores);
  /// Copies piece `k` of the block rank `from` publishes for this rank (`bytes` in all) into `block`, once it is
  /// there, and acknowledges it. `stream`: with non-temporal stores (call stream_copy_fence() at the end).
  void get(const Context& c, int from, char* block, std::size_t bytes, std::size_t k, bool stream);
  /// Like get(), but combines the piece into `block` with the call's op (Context::reduce) instead of copying it.
  void reduce(const Context& c, int from, char* block, std::size_t bytes, std::size_t k);

 private:
  ShmPipe(std::unique_ptr<ShmWindows> win, PipeLanes lanes, int size, std::size_t piece, bool whole);
  struct Layout;
  // Waits for piece k of the block rank `from` publishes for this rank, checks it belongs to this call, hands it
  // to `use` (the piece, its offset in the block, its bytes), then acknowledges it.
  void take(const Context& c, int from, std::size_t bytes, std::size_t k,
            const std::function<void(const char*, std::size_t, std::size_t)>& use);
  std::size_t lane_of(int reader) const { return lanes_ == PipeLanes::kOne ? 0 : static_cast<std::size_t>(reader); }

  std::unique_ptr<ShmWindows> win_;
  PipeLanes lanes_;
  int size_;
  std::size_t piece_;
  bool whole_;  ///< whole_pieces()
  std::vector<uint64_t> sent_;      ///< per lane of this rank's window: pieces published so far
  std::vector<uint64_t> last_;      ///< per slot of this rank's window: the stamp it holds (0: none yet)
  std::vector<uint64_t> taken_;     ///< per producer: pieces this rank took from its lane for this rank
};

}  // namespace dcomm::coll
