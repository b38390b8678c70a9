#include "collectives/validate.hpp"

#include <fmt/format.h>

#include <cmath>
#include <dcomm/error.hpp>

#include "collectives/device_support.hpp"

namespace dcomm::coll {

namespace {

// What Checker::fail throws: the argument and its problem, caught in call_problem().
struct Problem {
  std::string text;
};

class Checker {
 public:
  Checker(const Args& a, const GroupView& v) : a_(a), p_(v.size), r_(v.rank) {}

  [[noreturn]] void fail(const std::string& argument, const std::string& problem) const {
    throw Problem{argument + " " + problem};
  }
  void buffer(const char* name, const Buffer& b) const {
    if (b.data == nullptr && b.count > 0) fail(name, fmt::format("is null but its count is {}", b.count));
    fits(name, b.count, b.dtype, 1);
    if (!device_supported(b.device)) {
      fail(name, fmt::format("is on {}, which this build cannot reduce or stage (built without the CUDA "
                             "reductions); pass host memory",
                             to_string(b.device)));
    }
  }
  void same_kind(const Buffer& s, const Buffer& r) const {
    if (s.dtype != r.dtype)
      fail("recv", fmt::format("has dtype {} but send has {}", to_string(r.dtype), to_string(s.dtype)));
    if (!(s.device == r.device)) {
      fail("recv", fmt::format("is on {} but send is on {}", to_string(r.device), to_string(s.device)));
    }
  }
  // `count` elements of `dtype`, `times` over (the P blocks a gather or scatter moves), must not overflow a byte
  // size: 2^62 + 2 float32 would wrap to 8 bytes and pass every later check.
  void fits(const char* name, std::size_t count, DType dtype, std::size_t times) const {
    if (bytes_fit(count, dtype_size(dtype), times)) return;
    fail(name, fmt::format("count {}{} of {} is {:.4g} bytes, more than the {} bytes a call can address (the byte "
                           "size overflows); check the count",
                           count, times > 1 ? fmt::format(" x {} ranks", times) : "", to_string(dtype),
                           static_cast<long double>(count) * static_cast<long double>(times) *
                               static_cast<long double>(dtype_size(dtype)),
                           kMaxCallBytes));
  }
  // The P blocks of `count` elements each that a gather, scatter or their all- and reduce- forms move.
  void blocks_fit(const char* name, std::size_t count, DType dtype) const {
    fits(name, count, dtype, static_cast<std::size_t>(p_));
  }
  // `why` is a literal: a std::string here cost an allocation on every call of the fast path.
  void count_is(const char* name, std::size_t have, std::size_t want, const char* why) const {
    if (have != want) fail(name, fmt::format("has count {} but must have {} ({})", have, want, why));
  }
  void vector(const char* name, const std::vector<std::size_t>& counts, const std::vector<std::size_t>& displs,
              const Buffer& buf) const {
    auto p = static_cast<std::size_t>(p_);
    if (counts.size() != p) fail(name, fmt::format("counts has {} entries for a group of {} ranks", counts.size(), p));
    if (!displs.empty() && displs.size() != p) {
      fail(name, fmt::format("displs has {} entries for a group of {} ranks (or pass none for packed blocks)",
                             displs.size(), p));
    }
    std::size_t packed = 0;
    for (std::size_t i = 0; i < p; ++i) {
      // Compared without adding first: a huge count or displacement must not wrap to a small end.
      const std::size_t start = displs.empty() ? packed : displs[i];
      if (counts[i] > buf.count || start > buf.count - counts[i]) {
        fail(name, fmt::format("block {} (displacement {}, count {}) ends past the buffer's {} elements", i, start,
                               counts[i], buf.count));
      }
      packed += counts[i];  // bounded by buf.count on the packed path, so it cannot wrap
    }
  }
  bool root() const { return r_ == a_.root; }
  std::size_t size() const { return static_cast<std::size_t>(p_); }
  std::size_t rank() const { return static_cast<std::size_t>(r_); }

 private:
  const Args& a_;
  int p_;
  int r_;
};

}  // namespace

namespace {

// Throws Problem for the first thing wrong with this rank's call.
void check_call(const Args& a, const GroupView& v) {
  Checker ck(a, v);
  if (rooted(a.coll) && (a.root < 0 || a.root >= v.size)) {
    ck.fail("root",
            fmt::format("{} is out of range for a group of {} ranks (valid: 0..{})", a.root, v.size, v.size - 1));
  }
  if (a.vector_variant && a.coll != Collective::kScatter && a.coll != Collective::kGather &&
      a.coll != Collective::kAllToAll) {
    ck.fail("vector_variant", "is set, but only scatter, gather and all_to_all have v-variants");
  }
  if (is_reducing(a.coll)) {
    if (!op_fits_dtype(a.red.op, a.send.dtype)) {
      ck.fail("op", fmt::format("{} does not apply to dtype {} (bitwise ops need an integer dtype)",
                                to_string(a.red.op), to_string(a.send.dtype)));
    }
    if (a.red.op == ReduceOp::kPreMulSum && !std::isfinite(a.red.scale)) {
      ck.fail("scale", fmt::format("{} of premul_sum is not finite", a.red.scale));
    }
  }
  const std::size_t p = ck.size();
  switch (a.coll) {
    case Collective::kAllReduce:
      ck.buffer("send", a.send), ck.buffer("recv", a.recv), ck.same_kind(a.send, a.recv);
      ck.count_is("recv", a.recv.count, a.send.count, "all_reduce's recv matches send");
      break;
    case Collective::kBroadcast:
      ck.buffer("buffer", a.send);
      break;
    case Collective::kReduce:
      ck.buffer("send", a.send);
      if (ck.root()) {
        ck.buffer("recv", a.recv), ck.same_kind(a.send, a.recv);
        ck.count_is("recv", a.recv.count, a.send.count, "the root's recv matches send");
      }
      break;
    case Collective::kScatter:
      ck.buffer("recv", a.recv);
      if (!a.vector_variant) ck.blocks_fit("recv", a.recv.count, a.recv.dtype);
      if (!ck.root()) break;
      ck.buffer("send", a.send), ck.same_kind(a.send, a.recv);
      if (a.vector_variant) {
        ck.vector("send", a.send_counts, a.send_displs, a.send);
        ck.count_is("recv", a.recv.count, a.send_counts[ck.rank()], "the root's own count in counts");
      } else {
        ck.count_is("send", a.send.count, p * a.recv.count, "group size x recv count");
      }
      break;
    case Collective::kGather:
      ck.buffer("send", a.send);
      if (!a.vector_variant) ck.blocks_fit("send", a.send.count, a.send.dtype);
      if (!ck.root()) break;
      ck.buffer("recv", a.recv), ck.same_kind(a.send, a.recv);
      if (a.vector_variant) {
        ck.vector("recv", a.recv_counts, a.recv_displs, a.recv);
        ck.count_is("send", a.send.count, a.recv_counts[ck.rank()], "the root's own count in counts");
      } else {
        ck.count_is("recv", a.recv.count, p * a.send.count, "group size x send count");
      }
      break;
    case Collective::kAllGather:
      ck.buffer("send", a.send), ck.buffer("recv", a.recv), ck.same_kind(a.send, a.recv);
      ck.blocks_fit("send", a.send.count, a.send.dtype);
      ck.count_is("recv", a.recv.count, p * a.send.count, "group size x send count");
      break;
    case Collective::kReduceScatter:
      ck.buffer("send", a.send), ck.buffer("recv", a.recv), ck.same_kind(a.send, a.recv);
      ck.blocks_fit("recv", a.recv.count, a.recv.dtype);
      ck.count_is("send", a.send.count, p * a.recv.count, "group size x recv count");
      break;
    case Collective::kAllToAll:
      ck.buffer("send", a.send), ck.buffer("recv", a.recv), ck.same_kind(a.send, a.recv);
      if (a.vector_variant) {
        ck.vector("send", a.send_counts, a.send_displs, a.send);
        ck.vector("recv", a.recv_counts, a.recv_displs, a.recv);
        ck.count_is("recv", a.recv_counts[ck.rank()], a.send_counts[ck.rank()], "this rank's block to itself");
      } else {
        ck.count_is("recv", a.recv.count, a.send.count, "all_to_all's recv matches send");
        if (a.send.count % p != 0) {
          ck.fail("send", fmt::format("count {} is not a multiple of the group size {}", a.send.count, p));
        }
      }
      break;
    case Collective::kBarrier:
      break;
  }
}

}  // namespace

std::string call_problem(const Args& a, const GroupView& v) {
  try {
    check_call(a, v);
  } catch (const Problem& p) {
    return p.text;
  }
  return {};
}

}  // namespace dcomm::coll
