#include <algorithm>

#include "collectives/primitives.hpp"

namespace dcomm::coll {

void binomial_reduce(Context& c, char* buf, std::size_t count, int root, uint32_t step) {
  if (c.size() == 1 || count == 0) return;
  pattern::TreeNode node = pattern::binomial_tree(c.rank(), c.size(), root);
  std::size_t bytes = count * c.esize();
  if (!node.children.empty()) {
    // Smallest subtree first: it is the first to be ready. The fixed order keeps results deterministic.
    Scratch tmp = c.scratch(count);
    for (int child : node.children) {
      c.recv(child, step, tmp.data(), bytes);
      c.reduce(buf, tmp.data(), count);
    }
  }
  if (node.parent >= 0) c.send(node.parent, step, buf, bytes);
}

void binomial_broadcast(Context& c, char* buf, std::size_t count, int root, uint32_t step) {
  if (c.size() == 1 || count == 0) return;
  pattern::TreeNode node = pattern::binomial_tree(c.rank(), c.size(), root);
  std::size_t bytes = count * c.esize();
  if (node.parent >= 0) c.recv(node.parent, step, buf, bytes);
  std::vector<transport::RequestPtr> sends;
  for (auto it = node.children.rbegin(); it != node.children.rend(); ++it) {
    sends.push_back(c.isend(*it, step, buf, bytes));  // largest subtree first: it has the longest way to go
  }
  c.wait_all(sends);
}

}  // namespace dcomm::coll
