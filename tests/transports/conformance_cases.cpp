// The traffic cases of the conformance suite: ping-pong, sizes, many in flight, any-source, tag ordering.
// Edge cases (unexpected messages, cancel, short buffers, 256 MiB, poison) are in conformance_edge.cpp.
#include <fmt/format.h>

#include <set>

#include "tests/transports/conformance.hpp"
#include "transports/shm/shm_transport.hpp"

namespace dcomm::test {

using transport::Mesh;
using transport::RequestPtr;

void check_payload(RankLog& log, const std::vector<uint8_t>& buf, std::size_t got, int src, int dst, uint64_t salt,
                   std::size_t want, const std::string& what) {
  log.expect(got == want, fmt::format("{}: received {} bytes, want {}", what, got, want));
  long long bad = first_mismatch(buf.data(), src, dst, salt, std::min(got, want));
  log.expect(bad < 0, fmt::format("{}: byte {} differs from what rank {} sent", what, bad, src));
}

namespace {

void ping_pong(Mesh& m, RankLog& log) {
  for (std::size_t bytes : {std::size_t{1}, std::size_t{8}, std::size_t{4096}}) {
    for (int p = 1; p < m.size(); ++p) {
      if (m.rank() != 0 && m.rank() != p) continue;
      int other = m.rank() == 0 ? p : 0;
      std::vector<uint8_t> in(bytes);
      if (m.rank() == 0) {
        auto out = make_payload(0, p, bytes, bytes);
        auto s = m.isend(p, 10, out.data(), bytes);
        auto r = m.irecv(p, 11, in.data(), bytes);
        wait_ok(m, *s, log, "ping");
        if (wait_ok(m, *r, log, "pong")) check_payload(log, in, r->received, p, 0, bytes, bytes, "pong");
      } else {
        auto r = m.irecv(other, 10, in.data(), bytes);
        if (wait_ok(m, *r, log, "ping")) check_payload(log, in, r->received, 0, p, bytes, bytes, "ping");
        auto out = make_payload(p, 0, bytes, bytes);
        auto s = m.isend(0, 11, out.data(), bytes);
        wait_ok(m, *s, log, "pong");
      }
    }
  }
}

// Every rank sends every size to every rank, itself included: 0, 1, odd, around pages and chunks, and at the
// shm transport's boundaries as its knobs set them now (the eager limit, exactly one chunk, past the ring).
std::vector<std::size_t> size_list() {
  const auto k = transport::shm::Knobs::from_env();
  std::set<std::size_t> s = {0, 1, 7, 255, 4097, 65537, (1u << 20) + 3, (3u << 20) + 5};
  for (uint64_t v : {k.eager_bytes, k.eager_bytes + 1, k.chunk_bytes - 1, k.chunk_bytes, k.chunk_bytes + 1,
                     2 * k.chunk_bytes + 1, k.ring_bytes + 1}) {
    s.insert(static_cast<std::size_t>(v));
  }
  return {s.begin(), s.end()};
}

void sizes(Mesh& m, RankLog& log) {
  static const std::vector<std::size_t> kSizes = size_list();
  std::vector<std::vector<uint8_t>> in, out;
  std::vector<std::pair<RequestPtr, std::size_t>> recvs;
  std::vector<RequestPtr> sends;
  for (int p = 0; p < m.size(); ++p) {
    for (std::size_t i = 0; i < kSizes.size(); ++i) {
      in.emplace_back(kSizes[i] + 16);
      recvs.emplace_back(m.irecv(p, 100 + i, in.back().data(), in.back().size()), in.size() - 1);
    }
  }
  for (int p = 0; p < m.size(); ++p) {
    for (std::size_t i = 0; i < kSizes.size(); ++i) {
      out.push_back(make_payload(m.rank(), p, i, kSizes[i]));
      sends.push_back(m.isend(p, 100 + i, out.back().data(), kSizes[i]));
    }
  }
  for (std::size_t k = 0; k < recvs.size(); ++k) {
    int src = static_cast<int>(k / kSizes.size());
    std::size_t i = k % kSizes.size();
    auto what = fmt::format("{} B from rank {}", kSizes[i], src);
    if (wait_ok(m, *recvs[k].first, log, what)) {
      check_payload(log, in[recvs[k].second], recvs[k].first->received, src, m.rank(), i, kSizes[i], what);
      log.expect(recvs[k].first->source == src, what + ": wrong source");
    }
  }
  for (auto& s : sends) wait_ok(m, *s, log, "send");
}

// Hundreds of messages in flight both ways on one tag: they must match in the order they were sent.
void many_in_flight(Mesh& m, RankLog& log) {
  constexpr int kCount = 300;
  auto size_of = [](int i) { return static_cast<std::size_t>((i * 97) % 3000 + (i % 50 == 7 ? 100000 : 0)); };
  std::vector<std::vector<uint8_t>> out, in;
  std::vector<RequestPtr> sends, recvs;
  out.reserve(static_cast<std::size_t>(kCount * m.size()));
  in.reserve(static_cast<std::size_t>(kCount * m.size()));
  auto send_range = [&](int from, int to) {
    for (int p = 0; p < m.size(); ++p) {
      if (p == m.rank()) continue;
      for (int i = from; i < to; ++i) {
        out.push_back(make_payload(m.rank(), p, static_cast<uint64_t>(i), size_of(i)));
        sends.push_back(m.isend(p, 200, out.back().data(), size_of(i)));
      }
    }
  };
  send_range(0, kCount / 2);  // these may arrive before their receives: the unexpected path
  for (int p = 0; p < m.size(); ++p) {
    if (p == m.rank()) continue;
    for (int i = 0; i < kCount; ++i) {
      in.emplace_back(size_of(i));
      recvs.push_back(m.irecv(p, 200, in.back().data(), size_of(i)));
    }
  }
  send_range(kCount / 2, kCount);
  std::size_t k = 0;
  for (int p = 0; p < m.size(); ++p) {
    if (p == m.rank()) continue;
    for (int i = 0; i < kCount; ++i, ++k) {
      auto what = fmt::format("message {} from rank {}", i, p);
      if (wait_ok(m, *recvs[k], log, what)) {
        check_payload(log, in[k], recvs[k]->received, p, m.rank(), static_cast<uint64_t>(i), size_of(i), what);
      }
    }
  }
  for (auto& s : sends) wait_ok(m, *s, log, "send");
}

// Rank 0 receives from any source; each request reports who sent it.
void any_source(Mesh& m, RankLog& log) {
  if (m.rank() != 0) {
    auto out = make_payload(m.rank(), 0, 7, static_cast<std::size_t>(10 + m.rank()));
    auto s = m.isend(0, 300, out.data(), out.size());
    wait_ok(m, *s, log, "any-source send");
    return;
  }
  std::vector<std::vector<uint8_t>> in(static_cast<std::size_t>(m.size()), std::vector<uint8_t>(64));
  std::vector<RequestPtr> recvs;
  for (int i = 1; i < m.size(); ++i) recvs.push_back(m.irecv(kAnySource, 300, in[i].data(), 64));
  std::set<int> seen;
  for (int i = 1; i < m.size(); ++i) {
    auto& r = *recvs[static_cast<std::size_t>(i - 1)];
    if (!wait_ok(m, r, log, "any-source recv")) continue;
    log.expect(r.source > 0 && r.source < m.size(), fmt::format("any-source: bad source {}", r.source));
    if (r.source <= 0 || r.source >= m.size()) continue;
    seen.insert(r.source);
    check_payload(log, in[i], r.received, r.source, 0, 7, static_cast<std::size_t>(10 + r.source), "any-source");
  }
  log.expect(static_cast<int>(seen.size()) == m.size() - 1, "any-source: some rank's message was seen twice");
}

// Two tags interleaved by the sender, received tag B first: each tag keeps its own order.
void tag_order(Mesh& m, RankLog& log) {
  int next = (m.rank() + 1) % m.size(), prev = (m.rank() + m.size() - 1) % m.size();
  constexpr int kEach = 10;
  std::vector<std::vector<uint8_t>> out;
  std::vector<RequestPtr> sends;
  for (int i = 0; i < kEach; ++i) {
    for (uint64_t tag : {400u, 401u}) {
      std::size_t bytes = tag == 400 ? 16 : 33;
      out.push_back(make_payload(m.rank(), next, tag * 100 + static_cast<uint64_t>(i), bytes));
      sends.push_back(m.isend(next, tag, out.back().data(), bytes));
    }
  }
  for (uint64_t tag : {401u, 400u}) {
    for (int i = 0; i < kEach; ++i) {
      std::vector<uint8_t> in(64);
      auto r = m.irecv(prev, tag, in.data(), in.size());
      auto what = fmt::format("tag {} message {} from rank {}", tag, i, prev);
      if (wait_ok(m, *r, log, what)) {
        check_payload(log, in, r->received, prev, m.rank(), tag * 100 + static_cast<uint64_t>(i),
                      tag == 400 ? 16 : 33, what);
      }
    }
  }
  for (auto& s : sends) wait_ok(m, *s, log, "send");
}

// Small sends handed over on the spot (Mesh::send_now) among isends of every size on one tag, enough of them to
// fill the shm ring before any receive is posted (the backlog): they must match in the order sent. Over shm every
// send up to the eager limit goes on the spot; to this rank, never (the self channel pairs it with a receive).
void send_now(Mesh& m, RankLog& log) {
  const int next = (m.rank() + 1) % m.size(), prev = (m.rank() + m.size() - 1) % m.size();
  const auto k = transport::shm::Knobs::from_env();
  const bool shm = std::string(m.transport_name(next)) == "shm";
  // A burst of small records beyond the ring's bytes, then sizes around the eager limit, interleaved.
  std::vector<std::size_t> plan;
  const std::size_t burst = static_cast<std::size_t>(k.ring_bytes / 128 + 50);
  for (std::size_t i = 0; i < burst; ++i) plan.push_back(i % 3 == 0 ? 0 : (i * 7) % 40 + 1);
  for (uint64_t v : {k.eager_bytes, k.eager_bytes + 1, uint64_t{8}, uint64_t{3 * k.chunk_bytes + 5}, uint64_t{1},
                     k.eager_bytes - 1, uint64_t{0}}) {
    plan.push_back(static_cast<std::size_t>(v));
  }
  std::vector<std::vector<uint8_t>> out(plan.size());
  std::vector<RequestPtr> sends;
  std::size_t now = 0;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    out[i] = make_payload(m.rank(), next, 9000 + i, plan[i]);
    // Every other small message tries the spot; the rest go by isend, in between.
    if (i % 2 == 0 && m.send_now(next, 600, out[i].data(), plan[i])) {
      ++now;
      log.expect(plan[i] <= k.eager_bytes, fmt::format("send_now took {} B, over the eager limit", plan[i]));
      out[i].assign(out[i].size(), 0xEE);  // the message went whole: its buffer is the caller's again
      continue;
    }
    log.expect(!(shm && i % 2 == 0 && plan[i] <= k.eager_bytes && next != m.rank()),
               fmt::format("send_now refused {} B over shm (message {})", plan[i], i));
    sends.push_back(m.isend(next, 600, out[i].data(), plan[i]));
  }
  log.expect(!shm || now > 0, "no send went on the spot over shm");
  log.expect(next != m.rank() || now == 0, "a send to this rank went on the spot");
  for (std::size_t i = 0; i < plan.size(); ++i) {
    std::vector<uint8_t> in(plan[i] + 8);
    auto r = m.irecv(prev, 600, in.data(), in.size());
    auto what = fmt::format("message {} ({} B) from rank {}", i, plan[i], prev);
    if (wait_ok(m, *r, log, what)) check_payload(log, in, r->received, prev, m.rank(), 9000 + i, plan[i], what);
  }
  for (auto& s : sends) wait_ok(m, *s, log, "send");
}

}  // namespace

void unexpected_first(Mesh& m, RankLog& log);
void cancel_receive(Mesh& m, RankLog& log);
void short_buffer(Mesh& m, RankLog& log);

const std::vector<ConformanceCase>& conformance_cases() {
  static const std::vector<ConformanceCase> cases = {
      {"ping_pong", &ping_pong, 2},           {"sizes", &sizes, 1},
      {"many_in_flight", &many_in_flight, 2}, {"any_source", &any_source, 2},
      {"tag_order", &tag_order, 1},           {"unexpected_first", &unexpected_first, 1},
      {"cancel", &cancel_receive, 1},         {"short_buffer", &short_buffer, 2},
      {"send_now", &send_now, 1},
  };
  return cases;
}

}  // namespace dcomm::test
