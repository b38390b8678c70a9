#include "collectives/layout.hpp"

namespace dcomm::coll {

std::vector<pattern::Block> uniform_blocks(std::size_t n, int size) {
  std::vector<pattern::Block> out(static_cast<std::size_t>(size));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = {i * n, n};
  return out;
}

std::vector<pattern::Block> scatter_blocks(const Args& a, int size) {
  return a.vector_variant ? pattern::blocks_from(a.send_counts, a.send_displs) : uniform_blocks(a.recv.count, size);
}

std::vector<pattern::Block> gather_blocks(const Args& a, int size) {
  return a.vector_variant ? pattern::blocks_from(a.recv_counts, a.recv_displs) : uniform_blocks(a.send.count, size);
}

std::vector<pattern::Block> a2a_send_blocks(const Args& a, int size) {
  return a.vector_variant ? pattern::blocks_from(a.send_counts, a.send_displs)
                          : uniform_blocks(a.send.count / static_cast<std::size_t>(size), size);
}

std::vector<pattern::Block> a2a_recv_blocks(const Args& a, int size) {
  return a.vector_variant ? pattern::blocks_from(a.recv_counts, a.recv_displs)
                          : uniform_blocks(a.recv.count / static_cast<std::size_t>(size), size);
}

}  // namespace dcomm::coll
