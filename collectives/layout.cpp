#include "collectives/layout.hpp"

#include <cstring>

namespace dcomm::coll {

const char* own_block_first(const Args& a, int rank) {
  const auto* mine = static_cast<const char*>(a.send.data);
  char* out = static_cast<char*>(a.recv.data);
  const std::size_t bytes = a.send.bytes();
  if (mine < out || mine >= out + a.recv.bytes()) return mine;
  char* place = out + static_cast<std::size_t>(rank) * bytes;
  if (mine != place) std::memmove(place, mine, bytes);  // at rank 0 the two are the same bytes
  return place;
}

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
