// The pure rank arithmetic of collectives/patterns.hpp, without any transport.

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "collectives/patterns.hpp"

using namespace dcomm::coll::pattern;

TEST_CASE("even blocks cover the count with sizes differing by at most one", "[collectives][patterns]") {
  for (int parts = 1; parts <= 9; ++parts) {
    for (std::size_t count : {0u, 1u, 5u, 17u, 64u}) {
      auto b = even_blocks(count, parts);
      REQUIRE(b.size() == static_cast<std::size_t>(parts));
      std::size_t at = 0;
      for (const Block& x : b) {
        CHECK(x.offset == at);
        CHECK(x.count >= count / static_cast<std::size_t>(parts));
        CHECK(x.count <= count / static_cast<std::size_t>(parts) + 1);
        at += x.count;
      }
      CHECK(at == count);
    }
  }
  auto v = blocks_from({2, 0, 3}, {});
  CHECK(v[2].offset == 2);
  auto w = blocks_from({2, 0, 3}, {10, 0, 4});
  CHECK(w[0].offset == 10);
  CHECK(span(even_blocks(10, 4), 1, 3).offset == 3);
  CHECK(span(even_blocks(10, 4), 1, 3).count == 5);
}

TEST_CASE("pieces cut a block into chunks", "[collectives][patterns]") {
  auto p = pieces({5, 10}, 4);
  REQUIRE(p.size() == 3);
  CHECK(p[0].offset == 5);
  CHECK(p[2].count == 2);
  CHECK(pieces({3, 0}, 4).size() == 1);  // one empty piece keeps the schedule uniform
  CHECK(pieces({0, 7}, 0).size() == 7);  // a zero chunk means one element per piece
}

TEST_CASE("ring neighbours and logs", "[collectives][patterns]") {
  CHECK(ring_next(3, 4) == 0);
  CHECK(ring_prev(0, 4) == 3);
  CHECK(ceil_log2(1) == 0);
  CHECK(ceil_log2(5) == 3);
  CHECK(ceil_log2(8) == 3);
  CHECK(floor_pow2(7) == 4);
  CHECK(floor_pow2(8) == 8);
}

TEST_CASE("binomial trees span every rank from any root", "[collectives][patterns]") {
  for (int size = 1; size <= 9; ++size) {
    for (int root = 0; root < size; ++root) {
      int edges = 0;
      for (int r = 0; r < size; ++r) {
        TreeNode n = binomial_tree(r, size, root);
        CHECK((n.parent < 0) == (r == root));
        if (n.parent >= 0) {
          auto kids = binomial_tree(n.parent, size, root).children;
          CHECK(std::count(kids.begin(), kids.end(), r) == 1);
        }
        edges += static_cast<int>(n.children.size());
        int sub = 1;
        for (int c : n.children) sub += binomial_subtree_size(c, size, root);
        CHECK(sub == binomial_subtree_size(r, size, root));
      }
      CHECK(edges == size - 1);
      CHECK(binomial_subtree_size(root, size, root) == size);
    }
  }
  TreeNode n = binomial_tree(0, 8, 0);
  CHECK(n.children == std::vector<int>{1, 2, 4});  // smallest subtree first
}

TEST_CASE("folding maps non-powers of two onto a power of two", "[collectives][patterns]") {
  for (int size = 1; size <= 9; ++size) {
    std::set<int> vranks;
    for (int r = 0; r < size; ++r) {
      Fold f = fold(r, size);
      if (f.vrank >= 0) {
        vranks.insert(f.vrank);
        CHECK(fold_real_rank(f.vrank, size) == r);
      } else {
        CHECK(fold(f.partner, size).vrank >= 0);
      }
    }
    CHECK(static_cast<int>(vranks.size()) == floor_pow2(size));
    int covered = 0, first = 0, last = 0;
    for (int v = 0; v < floor_pow2(size); ++v) {
      fold_real_span(v, size, &first, &last);
      CHECK(first == covered);
      covered = last;
    }
    CHECK(covered == size);
  }
  Fold f = fold(0, 6);  // rem 2: ranks 0..3 pair up
  CHECK(f.vrank == -1);
  CHECK(f.partner == 1);
  CHECK(fold(4, 6).vrank == 2);
}

TEST_CASE("halving schedules are symmetric and end at the own block", "[collectives][patterns]") {
  for (int p2 : {1, 2, 4, 8}) {
    for (int v = 0; v < p2; ++v) {
      auto steps = halving_schedule(v, p2);
      CHECK(static_cast<int>(steps.size()) == ceil_log2(p2));
      for (std::size_t k = 0; k < steps.size(); ++k) {
        const HalvingStep& s = steps[k];
        const HalvingStep t = halving_schedule(s.partner, p2)[k];
        CHECK(t.partner == v);
        CHECK(t.keep_lo == s.send_lo);  // what I send is what my partner keeps
        CHECK(t.keep_hi == s.send_hi);
      }
      if (!steps.empty()) {
        CHECK(steps.back().keep_lo == v);
        CHECK(steps.back().keep_hi == v + 1);
      }
    }
  }
  CHECK(doubling_partners(5, 8) == std::vector<int>{4, 7, 1});
}

TEST_CASE("the double binary tree is two spanning trees with complementary leaves", "[collectives][patterns]") {
  for (int size = 1; size <= 9; ++size) {
    for (int which = 0; which < 2; ++which) {
      int roots = 0, edges = 0;
      for (int r = 0; r < size; ++r) {
        BinaryNode n = double_tree(r, size, which);
        if (n.parent < 0) ++roots;
        for (int c : {n.child0, n.child1}) {
          if (c < 0) continue;
          ++edges;
          CHECK(double_tree(c, size, which).parent == r);
        }
      }
      CHECK(roots == 1);
      CHECK(edges == size - 1);
    }
    if (size >= 4) {
      // A rank that is an inner node of one tree is a leaf in the other (except around the roots).
      int both_inner = 0;
      for (int r = 0; r < size; ++r) {
        BinaryNode a = double_tree(r, size, 0), b = double_tree(r, size, 1);
        bool inner_a = a.child0 >= 0 || a.child1 >= 0, inner_b = b.child0 >= 0 || b.child1 >= 0;
        if (inner_a && inner_b) ++both_inner;
      }
      CHECK(both_inner <= 2);
    }
  }
}

TEST_CASE("dissemination partners", "[collectives][patterns]") {
  CHECK(dissemination_to(3, 5, 1) == 0);
  CHECK(dissemination_from(0, 5, 2) == 1);
}
