// The pure rank arithmetic of collectives/patterns.hpp, without any transport.

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "collectives/patterns.hpp"
#include "collectives/topology.hpp"

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

TEST_CASE("weighted blocks cover the count in order, the heavy part in proportion to its weight",
          "[collectives][patterns]") {
  for (int parts = 1; parts <= 9; ++parts) {
    for (int heavy = 0; heavy < parts; ++heavy) {
      for (std::size_t count : {0u, 1u, 2u, 5u, 17u, 64u, 1000003u}) {
        const auto hw = static_cast<std::size_t>(parts);
        const auto w = static_cast<std::size_t>(parts - 1);
        auto b = weighted_blocks(count, parts, heavy, hw, w);
        REQUIRE(b.size() == static_cast<std::size_t>(parts));
        std::size_t at = 0;
        for (const Block& x : b) {
          CHECK(x.offset == at);
          at += x.count;
        }
        CHECK(at == count);
        // The heavy part: count·hw/(hw + (P-1)w), rounded down; the others within one of each other.
        const std::size_t total = hw + static_cast<std::size_t>(parts - 1) * w;
        CHECK(b[static_cast<std::size_t>(heavy)].count == count * hw / total);
        std::size_t lo = count, hi = 0;
        for (int i = 0; i < parts; ++i) {
          if (i == heavy) continue;
          lo = std::min(lo, b[static_cast<std::size_t>(i)].count);
          hi = std::max(hi, b[static_cast<std::size_t>(i)].count);
        }
        if (parts > 1) CHECK(hi - lo <= 1);
      }
    }
  }
  // Two parts weighing 2 and 1: two thirds and one third, wherever the heavy one sits.
  auto two = weighted_blocks(300, 2, 1, 2, 1);
  CHECK(two[0].count == 100);
  CHECK(two[1].offset == 100);
  CHECK(two[1].count == 200);
  // Equal weights: even_blocks' sizes (the heavy part rounded down).
  CHECK(weighted_blocks(10, 4, 0, 1, 1)[0].count == 2);
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

TEST_CASE("Bruck rounds collect every block exactly once", "[collectives][patterns]") {
  for (int size = 1; size <= 9; ++size) {
    // Simulate: held[r] lists the ranks whose blocks rank r holds, in place order.
    std::vector<std::vector<int>> held(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) held[static_cast<std::size_t>(r)] = {r};
    std::size_t rounds = bruck_schedule(0, size).size();
    CHECK(static_cast<int>(rounds) == ceil_log2(size));
    for (std::size_t k = 0; k < rounds; ++k) {
      auto next = held;
      for (int r = 0; r < size; ++r) {
        BruckStep s = bruck_schedule(r, size)[k];
        CHECK(bruck_schedule(s.to, size)[k].from == r);
        CHECK(static_cast<int>(held[static_cast<std::size_t>(r)].size()) == s.blocks_held);
        const auto& theirs = held[static_cast<std::size_t>(s.from)];
        auto& mine = next[static_cast<std::size_t>(r)];
        mine.insert(mine.end(), theirs.begin(), theirs.begin() + s.blocks);
      }
      held = next;
    }
    for (int r = 0; r < size; ++r) {
      for (int i = 0; i < size; ++i)
        CHECK(held[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] == (r + i) % size);
    }
  }
}

TEST_CASE("dissemination partners", "[collectives][patterns]") {
  CHECK(dissemination_to(3, 5, 1) == 0);
  CHECK(dissemination_from(0, 5, 2) == 1);
}

TEST_CASE("topology: nodes by first rank, local ranks in group order, rails cover every node",
          "[collectives][patterns]") {
  using dcomm::coll::GroupView;
  using dcomm::coll::Topology;
  // Ranks interleaved over three uneven nodes: b a a b c b.
  const std::vector<std::string> hosts = {"b", "a", "a", "b", "c", "b"};
  Topology t = dcomm::coll::topology_of(hosts);
  REQUIRE(t.node_count() == 3);
  CHECK(t.nodes == std::vector<std::vector<int>>{{0, 3, 5}, {1, 2}, {4}});
  CHECK(t.host_ids == std::vector<std::string>{"b", "a", "c"});
  CHECK(t.node_of == std::vector<int>{0, 1, 1, 0, 2, 0});
  CHECK(t.local_of == std::vector<int>{0, 0, 1, 1, 0, 2});
  CHECK(t.max_local == 3);
  CHECK(t.min_local == 1);
  CHECK(t.leader(1) == 1);
  // Rail 2: local rank 2 of node 0, 2 mod 2 = 0 of node 1, the only rank of node 2.
  CHECK(t.rail_member(2, 0) == 5);
  CHECK(t.rail_member(2, 1) == 1);
  CHECK(t.rail_member(2, 2) == 4);
  CHECK(t.describe() ==
        "3 nodes (ranks per node 3, 2, 1): node 0 'b' ranks 0,3,5 (leader 0); node 1 'a' ranks 1,2 "
        "(leader 1); node 2 'c' ranks 4 (leader 4)");
  // Consecutive ranks as ranges; past 8 nodes, a count.
  std::vector<std::string> many;
  for (int r = 0; r < 40; ++r) many.push_back(fmt::format("h{}", r / 4));
  CHECK(dcomm::coll::topology_of(many).describe().starts_with(
      "10 nodes (ranks per node 4, 4, 4, 4, 4, 4, 4, 4, 4, 4): node 0 'h0' ranks 0-3 (leader 0); node 1 'h1' ranks "
      "4-7 (leader 4);"));
  CHECK(dcomm::coll::topology_of(many).describe().ends_with("; 2 more nodes"));
  // Rank 3's views: its node, the leaders (not it), and the rails it serves (rail 1 only).
  GroupView group;
  group.rank = 3;
  group.size = 6;
  group.world_ranks = {10, 11, 12, 13, 14, 15};
  auto h = dcomm::coll::build_hierarchy(group, hosts);
  CHECK(h->node == 0);
  CHECK(h->local == 1);
  CHECK(h->node_view.world_ranks == std::vector<int>{10, 13, 15});
  CHECK(h->node_view.rank == 1);
  CHECK(h->leaders.world_ranks == std::vector<int>{10, 11, 14});
  CHECK(h->leaders.rank == -1);
  REQUIRE(h->rails.size() == 3);
  CHECK(h->rails[1].world_ranks == std::vector<int>{13, 12, 14});
  CHECK(h->rails[1].rank == 0);
  CHECK(h->rails[0].rank == -1);
  CHECK(h->rails[2].rank == -1);
  // One node: no rails, and the hierarchical rows refuse it.
  GroupView one;
  one.size = 2;
  one.hierarchy = dcomm::coll::build_hierarchy(one, {"a", "a"});
  CHECK(one.hierarchy->rails.empty());
  CHECK_FALSE(dcomm::coll::spans_nodes(one));
  group.hierarchy = h;
  CHECK(dcomm::coll::spans_nodes(group));
}
