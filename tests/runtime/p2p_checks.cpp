#include "tests/runtime/p2p_checks.hpp"

#include <fmt/format.h>

namespace dcomm::test {
namespace {

// Distinct for every sender, message and index; never zero.
double sent_value(int rank, std::size_t msg, std::size_t i) {
  return 1.0 + rank * 1e6 + static_cast<double>(msg) * 1e3 + static_cast<double>(i % 991) * 0.5;
}

}  // namespace

void check_p2p_sizes_in_order(ProcessGroup& pg, std::vector<std::string>& f) {
  const int r = pg.rank(), n = pg.size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  // Doubles: 0, 1, odd, around the shm eager limit (16 KiB: 2048), past a 256 KiB chunk, then small again.
  const std::vector<std::size_t> counts = {0, 1, 7, 2047, 2048, 2049, 1, 40000, 3, 0, 2048, 5};
  std::vector<std::vector<double>> out(counts.size()), in(counts.size());
  std::vector<WorkPtr> sends;
  for (std::size_t m = 0; m < counts.size(); ++m) {
    out[m].resize(counts[m]);
    for (std::size_t i = 0; i < counts[m]; ++i) out[m][i] = sent_value(r, m, i);
    sends.push_back(pg.isend(Buffer(out[m]), next, 21));
    // Complete means the buffer is the caller's again: what the receiver gets must not change.
    if (sends.back()->is_completed()) std::fill(out[m].begin(), out[m].end(), -7.0);
  }
  for (std::size_t m = 0; m < counts.size(); ++m) {
    in[m].assign(counts[m] + 3, -1.0);  // room to spare: the handle tells the size
    auto w = pg.recv(Buffer(in[m]), prev, 21);
    if (w->bytes() != counts[m] * sizeof(double) || w->source() != prev) {
      f.push_back(fmt::format("rank {}: message {} from rank {}: {} bytes from rank {}, want {} from rank {}", r, m,
                              prev, w->bytes(), w->source(), counts[m] * sizeof(double), prev));
    }
    for (std::size_t i = 0; i < counts[m]; ++i) {
      if (in[m][i] != sent_value(prev, m, i)) {
        f.push_back(fmt::format("rank {}: message {} ({} doubles) from rank {}: element {} is {}, want {}", r, m,
                                counts[m], prev, i, in[m][i], sent_value(prev, m, i)));
        break;
      }
    }
    if (in[m][counts[m]] != -1.0) f.push_back(fmt::format("rank {}: message {} wrote past its size", r, m));
  }
  wait_all(sends);
}

void check_p2p_ping_pong(ProcessGroup& pg, std::vector<std::string>& f) {
  const int r = pg.rank(), n = pg.size();
  if (n < 2) return;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  double buf = 0;
  for (int round = 0; round < 2000; ++round) {
    // The token goes round the ring: rank 0 starts each round, every rank adds its part and passes it on.
    if (r == 0) {
      buf = round + 0.5;
      pg.send(Buffer(&buf, 1), next, 22);
      buf = -3;  // the send is over: the buffer may change at once
      pg.recv(Buffer(&buf, 1), prev, 22);
      const double want = round + 0.5 + (n - 1) * n / 2.0;
      if (buf != want) {
        f.push_back(fmt::format("rank 0: round {}: the token came back as {}, want {}", round, buf, want));
        return;
      }
    } else {
      pg.recv(Buffer(&buf, 1), prev, 22);
      buf += r;
      pg.send(Buffer(&buf, 1), next, 22);
      buf = -3;
    }
  }
}

}  // namespace dcomm::test
