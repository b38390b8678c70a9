#include "tests/transports/staging_cases.hpp"

#include <fmt/format.h>

#include <cstring>
#include <memory>

#include <dcomm/error.hpp>

namespace dcomm::test {

// memcpy wants non-null pointers even for 0 bytes, and an empty vector's data() may be null.
void FakeDeviceAccess::write(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}
void FakeDeviceAccess::read(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

namespace {

using transport::Mesh;
using transport::RequestPtr;

constexpr uint8_t kGuard = 0xA5;  // fills receive buffers beyond the message, which must stay untouched
constexpr std::size_t kSlack = 3;

/// A buffer in host or "device" memory, with room for `bytes` plus guard bytes.
class Buf {
 public:
  Buf(DeviceAccess* dev, std::size_t bytes) : dev_(dev), bytes_(bytes) {
    if (dev_ != nullptr) {
      ptr_ = dev_->alloc(bytes + kSlack);
    } else {
      host_.resize(bytes + kSlack);
      ptr_ = host_.data();
    }
  }
  ~Buf() {
    if (dev_ != nullptr) dev_->release(ptr_);
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;

  void* data() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return dev_ != nullptr ? dev_->device() : Device::host(); }
  const char* where() const { return dev_ != nullptr ? "device" : "host"; }
  void set(const std::vector<uint8_t>& v) {
    if (v.empty()) return;
    if (dev_ != nullptr) {
      dev_->write(ptr_, v.data(), v.size());
    } else {
      std::memcpy(ptr_, v.data(), v.size());
    }
  }
  std::vector<uint8_t> get() const {
    std::vector<uint8_t> v(bytes_ + kSlack);
    if (dev_ != nullptr) {
      dev_->read(v.data(), ptr_, v.size());
    } else {
      std::memcpy(v.data(), ptr_, v.size());
    }
    return v;
  }
  /// Fills the whole buffer (guard bytes included) with the guard byte.
  void guard() { set(std::vector<uint8_t>(bytes_ + kSlack, kGuard)); }

 private:
  DeviceAccess* dev_;
  std::size_t bytes_;
  void* ptr_ = nullptr;
  std::vector<uint8_t> host_;
};

/// Checks a received buffer: `want` bytes of the pattern, then guard bytes up to the end of the allocation.
void check(RankLog& log, const Buf& in, std::size_t got, int src, int dst, uint64_t salt, std::size_t want,
           const std::string& what) {
  std::vector<uint8_t> v = in.get();
  log.expect(got == want, fmt::format("{}: received {} bytes, sent {}", what, got, want));
  long long bad = first_mismatch(v.data(), src, dst, salt, std::min(want, v.size()));
  log.expect(bad < 0, fmt::format("{}: byte {} differs from what was sent", what, bad));
  for (std::size_t i = want; i < v.size(); ++i) {
    if (v[i] != kGuard) {
      log.failures.push_back(fmt::format("{}: byte {} past the message was overwritten", what, i));
      break;
    }
  }
}

// Every (size, sender memory, receiver memory) to the next rank; half the receives are posted before the message
// arrives, half after (the message then waits as unexpected).
void case_matrix(Mesh& m, RankLog& log, DeviceAccess& dev, std::size_t c) {
  const int me = m.rank(), to = (me + 1) % m.size(), from = (me + m.size() - 1) % m.size();
  uint64_t salt = 0;
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{7}, c - 1, c, c + 1, 3 * c + 5, 9 * c + 1}) {
    for (bool src_dev : {true, false}) {
      for (bool dst_dev : {true, false}) {
        ++salt;
        const uint64_t tag = 100 + salt;
        Buf out(src_dev ? &dev : nullptr, size), in(dst_dev ? &dev : nullptr, size);
        out.set(make_payload(me, to, salt, size));
        in.guard();
        const bool late = salt % 2 == 0;
        std::string what = fmt::format("matrix {} B {} -> {} ({} receive)", size, out.where(), in.where(),
                                       late ? "late" : "early");
        RequestPtr r = late ? nullptr : m.irecv(from, tag, in.data(), size, in.device());
        RequestPtr s = m.isend(to, tag, out.data(), size, out.device());
        if (late) {
          barrier(m, 90000 + salt, log);
          r = m.irecv(from, tag, in.data(), size, in.device());
        }
        bool ok = wait_ok(m, *r, log, what + " recv");
        ok = wait_ok(m, *s, log, what + " send") && ok;
        if (ok) check(log, in, r->received, from, me, salt, size, what);
      }
    }
  }
}

// Staged and plain messages on one tag, all sent before any receive: they must match in the order sent.
void case_one_tag(Mesh& m, RankLog& log, DeviceAccess& dev, std::size_t c, bool mixed) {
  const int me = m.rank(), to = (me + 1) % m.size(), from = (me + m.size() - 1) % m.size();
  const std::vector<std::pair<bool, std::size_t>> plan = {
      {true, 3 * c + 1}, {!mixed, 5}, {true, c}, {!mixed, 0}, {true, 1}, {!mixed, 2 * c + 7}, {true, 2 * c}};
  std::vector<std::unique_ptr<Buf>> outs, ins;
  std::vector<RequestPtr> sends, recvs;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    outs.push_back(std::make_unique<Buf>(plan[i].first ? &dev : nullptr, plan[i].second));
    outs.back()->set(make_payload(me, to, 500 + i, plan[i].second));
    // A host message tries the spot first (Mesh::send_now): it must not pass a staged message sent before it.
    if (!plan[i].first && m.send_now(to, 55, outs.back()->data(), plan[i].second)) {
      sends.push_back(nullptr);
      continue;
    }
    sends.push_back(m.isend(to, 55, outs.back()->data(), plan[i].second, outs.back()->device()));
  }
  barrier(m, 91000, log);
  for (std::size_t i = 0; i < plan.size(); ++i) {
    ins.push_back(std::make_unique<Buf>(i % 2 == 0 ? nullptr : &dev, plan[i].second));  // the other memory kind
    ins.back()->guard();
    recvs.push_back(m.irecv(from, 55, ins.back()->data(), plan[i].second, ins.back()->device()));
  }
  for (std::size_t i = 0; i < plan.size(); ++i) {
    std::string what = fmt::format("one tag, message {} ({} B from {})", i, plan[i].second,
                                   plan[i].first ? "device" : "host");
    if (wait_ok(m, *recvs[i], log, what)) check(log, *ins[i], recvs[i]->received, from, me, 500 + i, plan[i].second, what);
    if (sends[i]) wait_ok(m, *sends[i], log, what + " send");
  }
}

// Rank 0 takes one staged message from every other rank with any-source receives into device memory.
void case_any_source(Mesh& m, RankLog& log, DeviceAccess& dev, std::size_t c) {
  auto size_of = [&](int rank) { return 2 * c + 17 * static_cast<std::size_t>(rank); };
  if (m.rank() != 0) {
    Buf out(&dev, size_of(m.rank()));
    out.set(make_payload(m.rank(), 0, 600, out.bytes()));
    auto s = m.isend(0, 60, out.data(), out.bytes(), out.device());
    wait_ok(m, *s, log, "any-source send");
    return;
  }
  std::vector<bool> seen(static_cast<std::size_t>(m.size()), false);
  for (int i = 1; i < m.size(); ++i) {
    Buf in(&dev, size_of(m.size()));
    in.guard();
    auto r = m.irecv(kAnySource, 60, in.data(), in.bytes(), in.device());
    if (!wait_ok(m, *r, log, "any-source recv")) return;
    const int src = r->source;
    if (src < 1 || src >= m.size() || seen[static_cast<std::size_t>(src)]) {
      log.failures.push_back(fmt::format("any-source recv: unexpected source {}", src));
      return;
    }
    seen[static_cast<std::size_t>(src)] = true;
    std::vector<uint8_t> v = in.get();
    log.expect(r->received == size_of(src), fmt::format("any-source from {}: {} bytes", src, r->received));
    log.expect(first_mismatch(v.data(), src, 0, 600, size_of(src)) < 0, fmt::format("any-source from {}: data", src));
  }
}

// A staged message larger than its receive fails only that receive; the next one on the tag arrives intact.
void case_too_small(Mesh& m, RankLog& log, DeviceAccess& dev, std::size_t c) {
  if (m.rank() == 1) {
    Buf big(&dev, 2 * c + 3), small(&dev, 17);
    big.set(make_payload(1, 0, 700, big.bytes()));
    small.set(make_payload(1, 0, 701, small.bytes()));
    auto s1 = m.isend(0, 70, big.data(), big.bytes(), big.device());
    auto s2 = m.isend(0, 70, small.data(), small.bytes(), small.device());
    wait_ok(m, *s1, log, "too-small: the big send");
    wait_ok(m, *s2, log, "too-small: the small send");
  } else if (m.rank() == 0) {
    Buf in(&dev, c);
    auto r = m.irecv(1, 70, in.data(), c, in.device());
    try {
      m.wait(*r, Deadline::after(std::chrono::seconds(60)), "too-small recv");
      log.failures.push_back("too-small: a receive smaller than the staged message succeeded");
    } catch (const InvalidUsageError& e) {
      log.expect(std::string(e.what()).find("does not fit") != std::string::npos,
                 fmt::format("too-small: the error does not say the message does not fit: {}", e.what()));
    }
    Buf next(&dev, 17);
    next.guard();
    auto r2 = m.irecv(1, 70, next.data(), 17, next.device());
    if (wait_ok(m, *r2, log, "too-small: the next message")) check(log, next, r2->received, 1, 0, 701, 17, "too-small next");
  }
}

}  // namespace

void run_staging_cases(Mesh& m, RankLog& log, DeviceAccess& dev, std::size_t chunk, bool mixed_tag_order) {
  struct Case {
    const char* name;
    void (*body)(Mesh&, RankLog&, DeviceAccess&, std::size_t, bool);
    int min_world;
  };
  auto matrix = [](Mesh& m, RankLog& log, DeviceAccess& dev, std::size_t c, bool) { case_matrix(m, log, dev, c); };
  auto any = [](Mesh& m, RankLog& log, DeviceAccess& dev, std::size_t c, bool) { case_any_source(m, log, dev, c); };
  auto small = [](Mesh& m, RankLog& log, DeviceAccess& dev, std::size_t c, bool) { case_too_small(m, log, dev, c); };
  const Case cases[] = {{"matrix", matrix, 2}, {"one_tag", &case_one_tag, 2}, {"any_source", any, 3},
                        {"too_small", small, 2}};
  for (const Case& c : cases) {
    if (m.size() < c.min_world) continue;
    std::size_t before = log.failures.size();
    try {
      c.body(m, log, dev, chunk, mixed_tag_order);
    } catch (const std::exception& e) {
      log.failures.push_back(fmt::format("threw: {}", e.what()));
    }
    barrier(m, 92000, log);
    for (std::size_t i = before; i < log.failures.size(); ++i) {
      log.failures[i] = fmt::format("[staging {}] rank {}: {}", c.name, m.rank(), log.failures[i]);
    }
  }
}

}  // namespace dcomm::test
