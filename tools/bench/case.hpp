#pragma once
// One measured point of a sweep: a collective at one size, dtype, op and algorithm, and the buffers it runs on.

#include <dcomm/types.hpp>

#include <memory>
#include <string>
#include <vector>

#include "tools/bench/buffers.hpp"
#include "tools/bench/coll.hpp"
#include "tools/bench/sizes.hpp"

namespace dcomm::bench {

struct Case {
  Coll coll = Coll::kAllReduce;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  std::string algo;  ///< "" for the group's choice
  Layout layout;
  int root = 0;
  bool inplace = false;
  bool check = false;
  /// --fresh: every call's inputs written just before it (as a program's are), then the ranks aligned (untimed).
  bool fresh = false;
  int iters = 1;
  int warmup = 0;
  Duration timeout{60000};
  Device device{};
  int rank = 0;
  int world = 1;
};

/// sendrecv pairs rank 2k with 2k + 1; an odd world's last rank sits out (-1).
int sendrecv_partner(int rank, int world);

/// A case's buffers, with the in-place arrangement applied (e.g. all_gather in place sends from its own block
/// of the receive buffer), and the fill and check of --check.
class Workspace {
 public:
  explicit Workspace(const Case& c);
  /// The views the collective is called with.
  const Buffer& send() const { return send_; }
  const Buffer& recv() const { return recv_; }
  /// Writes iteration `iter`'s inputs (and a poison where results go) and copies them to the device.
  void fill(int iter);
  /// Copies the results back and counts the elements that differ from iteration `iter`'s expectation.
  std::size_t count_wrong(int iter);

 private:
  std::size_t check_range(std::size_t offset, std::size_t n, int iter, std::size_t base, bool reduced, int src);

  Case c_;
  std::vector<std::unique_ptr<DeviceMemory>> mem_;  // [send, recv], or [io] in place
  std::vector<std::vector<unsigned char>> image_;   // host images of mem_
  Buffer send_, recv_;
  std::size_t send_mem_ = 0, recv_mem_ = 0;         // which of mem_ each view lies in
  std::size_t send_off_ = 0, recv_off_ = 0;         // the views' offsets there, in elements
};

}  // namespace dcomm::bench
