#include "tests/ucx/ucx_world.hpp"

#include <fmt/format.h>

#include <atomic>
#include <memory>
#include <thread>

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>

#include "transports/registry.hpp"

namespace dcomm::test {

using transport::Incoming;
using transport::Op;
using transport::OpPtr;

uint8_t pattern_byte(int rank, uint64_t index, std::size_t i) {
  return static_cast<uint8_t>((rank + 1) * 37 + index * 11 + i * 7 + (i >> 8) * 3 + (i >> 16));
}

std::vector<uint8_t> pattern(int rank, uint64_t index, std::size_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i) v[i] = pattern_byte(rank, index, i);
  return v;
}

std::string check_pattern(const uint8_t* got, std::size_t bytes, int rank, uint64_t index) {
  for (std::size_t i = 0; i < bytes; ++i) {
    if (got[i] != pattern_byte(rank, index, i)) {
      return fmt::format("message {} from rank {} ({} B): byte {} is {} but should be {}", index, rank, bytes, i,
                         got[i], pattern_byte(rank, index, i));
    }
  }
  return {};
}

void UcxRank::progress() {
  if (t_.progress(sink_)) {
    backoff_.reset();
  } else {
    backoff_.pause();
  }
}

OpPtr UcxRank::send(int peer, uint64_t tag, const void* data, std::size_t bytes) {
  auto op = std::make_shared<Op>();
  t_.isend(peer, tag, data, bytes, Device::host(), op);
  return op;
}

void UcxRank::wait(const OpPtr& op, Duration timeout) {
  Deadline d = Deadline::after(timeout);
  while (!op->done()) {
    if (d.expired()) throw TimeoutError(fmt::format("rank {}: op not done after {}", rank_, format_duration(timeout)));
    progress();
  }
  if (op->state() == Op::State::kFailed) std::rethrow_exception(op->error());
}

Incoming UcxRank::next(Duration timeout) {
  Deadline d = Deadline::after(timeout);
  while (sink_.queue.empty()) {
    if (d.expired()) throw TimeoutError(fmt::format("rank {}: no message after {}", rank_, format_duration(timeout)));
    progress();
  }
  Incoming m = sink_.queue.front();
  sink_.queue.pop_front();
  return m;
}

void UcxRank::receive(const Incoming& msg, void* dst) {
  auto op = std::make_shared<Op>();
  t_.receive(msg, dst, Device::host(), op);
  wait(op);
  if (op->bytes() != msg.bytes) fail(fmt::format("received {} B of a {} B message", op->bytes(), msg.bytes));
}

void UcxRank::fail(const std::string& what) { failures.push_back(what); }

std::vector<std::string> run_ucx_world(int n, const std::function<void(UcxRank&)>& body) {
  std::shared_ptr<Store> store = make_memory_store(std::chrono::seconds(60));
  std::atomic<int> finished{0};
  std::vector<std::vector<std::string>> failures(static_cast<std::size_t>(n));
  auto rank_main = [&](int r) {
    auto& out = failures[static_cast<std::size_t>(r)];
    std::unique_ptr<transport::Transport> t;
    try {
      transport::TransportContext ctx;
      ctx.self.rank = r;
      ctx.self.hostname = "threads";
      ctx.world_size = n;
      t = transport::make_ucx_transport(ctx);
      auto prefixed = make_prefix_store("ucx/", store);
      t->publish(*prefixed);
      std::vector<transport::PeerInfo> peers;
      for (int p = 0; p < n; ++p) {
        if (p != r) peers.push_back(transport::PeerInfo{p, p, 0, "h", "threads", 0});
      }
      t->connect(*prefixed, peers, Deadline::after(std::chrono::seconds(60)));
      UcxRank rank(r, n, *t);
      body(rank);
      out = rank.failures;
      // Keep progressing until every rank is done, so nobody closes while a peer still needs its progress.
      finished.fetch_add(1);
      Deadline d = Deadline::after(std::chrono::seconds(60));
      while (finished.load() < n && !d.expired()) rank.progress();
    } catch (const std::exception& e) {
      out.push_back(e.what());
      finished.fetch_add(1);
    }
    if (t) t->close();
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(rank_main, r);
  for (auto& th : threads) th.join();
  std::vector<std::string> all;
  for (int r = 0; r < n; ++r) {
    for (auto& f : failures[static_cast<std::size_t>(r)]) all.push_back(fmt::format("rank {}: {}", r, f));
  }
  return all;
}

std::string join(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

}  // namespace dcomm::test
