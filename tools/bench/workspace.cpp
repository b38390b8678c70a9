#include "tools/bench/case.hpp"

#include <algorithm>

#include "tools/bench/values.hpp"

namespace dcomm::bench {

int sendrecv_partner(int rank, int world) {
  const int partner = rank ^ 1;
  return partner < world ? partner : -1;
}

Workspace::Workspace(const Case& c) : c_(c) {
  const Layout& l = c.layout;
  const std::size_t es = dtype_size(c.dtype);
  // Broadcast always runs on one buffer; sendrecv and barrier have no in-place form.
  const bool one_buffer = c.coll == Coll::kBroadcast || (c.inplace && c.coll != Coll::kSendRecv);
  if (one_buffer) {
    const std::size_t n = std::max(l.send_count, l.recv_count);
    mem_.push_back(std::make_unique<DeviceMemory>(n * es, c.device));
    send_mem_ = recv_mem_ = 0;
    if (c.coll == Coll::kAllGather || c.coll == Coll::kGather) send_off_ = static_cast<std::size_t>(c.rank) * l.block;
    if (c.coll == Coll::kReduceScatter || c.coll == Coll::kScatter) {
      recv_off_ = static_cast<std::size_t>(c.rank) * l.block;
    }
  } else {
    mem_.push_back(std::make_unique<DeviceMemory>(l.send_count * es, c.device));
    mem_.push_back(std::make_unique<DeviceMemory>(l.recv_count * es, c.device));
    send_mem_ = 0;
    recv_mem_ = 1;
  }
  for (const auto& m : mem_) image_.emplace_back(m->bytes());
  auto view = [&](std::size_t mem, std::size_t off, std::size_t n) {
    return Buffer(static_cast<char*>(mem_[mem]->data()) + off * es, n, c.dtype, c.device);
  };
  send_ = view(send_mem_, send_off_, l.send_count);
  recv_ = view(recv_mem_, recv_off_, l.recv_count);
}

void Workspace::fill(int iter) {
  for (auto& img : image_) std::fill(img.begin(), img.end(), 0);  // 0 is no valid input or moved value
  const bool has_input = !(c_.coll == Coll::kBroadcast && c_.rank != c_.root);
  if (has_input) {
    void* base = image_[send_mem_].data();
    for (std::size_t i = 0; i < c_.layout.send_count; ++i) {
      const double v = is_reducing(c_.coll) ? reduce_input(c_.rank, i, iter) : move_input(c_.rank, i, iter);
      store(base, c_.dtype, send_off_ + i, v);
    }
  }
  for (std::size_t m = 0; m < mem_.size(); ++m) mem_[m]->upload(image_[m].data(), image_[m].size());
}

std::size_t Workspace::check_range(std::size_t offset, std::size_t n, int iter, std::size_t base, bool reduced,
                                   int src) {
  const void* data = image_[recv_mem_].data();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double got = load(data, c_.dtype, recv_off_ + offset + i);
    const double want = reduced ? reduce_expected(c_.op, c_.world, base + i, iter, c_.dtype)
                                : move_input(src, base + i, iter);
    if (!matches(got, want, c_.dtype)) ++wrong;
  }
  return wrong;
}

std::size_t Workspace::count_wrong(int iter) {
  const Layout& l = c_.layout;
  const bool root = c_.rank == c_.root;
  const auto rank_block = static_cast<std::size_t>(c_.rank) * l.block;
  if (c_.coll == Coll::kBarrier || ((c_.coll == Coll::kReduce || c_.coll == Coll::kGather) && !root)) return 0;
  mem_[recv_mem_]->download(image_[recv_mem_].data(), image_[recv_mem_].size());
  std::size_t wrong = 0;
  switch (c_.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce: return check_range(0, l.recv_count, iter, 0, true, 0);
    case Coll::kReduceScatter: return check_range(0, l.block, iter, rank_block, true, 0);
    case Coll::kBroadcast: return check_range(0, l.recv_count, iter, 0, false, c_.root);
    case Coll::kScatter: return check_range(0, l.block, iter, rank_block, false, c_.root);
    case Coll::kGather:
    case Coll::kAllGather:
      for (int j = 0; j < c_.world; ++j) wrong += check_range(j * l.block, l.block, iter, 0, false, j);
      return wrong;
    case Coll::kAllToAll:
      for (int j = 0; j < c_.world; ++j) wrong += check_range(j * l.block, l.block, iter, rank_block, false, j);
      return wrong;
    case Coll::kSendRecv: {
      const int partner = sendrecv_partner(c_.rank, c_.world);
      return partner < 0 ? 0 : check_range(0, l.recv_count, iter, 0, false, partner);
    }
    case Coll::kBarrier: break;
  }
  return wrong;
}

}  // namespace dcomm::bench
