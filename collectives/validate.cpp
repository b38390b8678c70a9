#include "collectives/validate.hpp"

#include <fmt/format.h>

#include <cmath>
#include <dcomm/error.hpp>

#include "collectives/device_support.hpp"

namespace dcomm::coll {

namespace {

class Checker {
 public:
  Checker(const Args& a, const GroupView& v) : a_(a), p_(v.size), r_(v.rank) {}

  [[noreturn]] void fail(const std::string& argument, const std::string& problem) const {
    throw InvalidUsageError(fmt::format("{}{} rank {}/{}: {} {}", to_string(a_.coll), a_.vector_variant ? "_v" : "", r_,
                                        p_, argument, problem));
  }
  void buffer(const char* name, const Buffer& b) const {
    if (b.data == nullptr && b.count > 0) fail(name, fmt::format("is null but its count is {}", b.count));
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
  void count_is(const char* name, std::size_t have, std::size_t want, const std::string& why) const {
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
      std::size_t end = (displs.empty() ? packed : displs[i]) + counts[i];
      packed += counts[i];
      if (end > buf.count) {
        fail(name, fmt::format("block {} ends at element {} but the buffer holds {}", i, end, buf.count));
      }
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

bool rooted(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kScatter ||
         c == Collective::kGather;
}

}  // namespace

bool is_reducing(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduce || c == Collective::kReduceScatter;
}

bool moves_nothing(const Args& a) {
  if (a.vector_variant || a.coll == Collective::kBarrier) return false;
  return (a.coll == Collective::kScatter || a.coll == Collective::kReduceScatter ? a.recv.count : a.send.count) == 0;
}

void validate_call(const Args& a, const GroupView& v) {
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
      ck.count_is("recv", a.recv.count, p * a.send.count, "group size x send count");
      break;
    case Collective::kReduceScatter:
      ck.buffer("send", a.send), ck.buffer("recv", a.recv), ck.same_kind(a.send, a.recv);
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

}  // namespace dcomm::coll
