#include "collectives/call_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <dcomm/error.hpp>

#include "collectives/patterns.hpp"
#include "collectives/slots.hpp"

namespace dcomm::coll {

namespace {

bool reducing(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduce || c == Collective::kReduceScatter;
}

// The count every rank passes alike for each collective.
uint64_t agreed_count(const Args& a) {
  switch (a.coll) {
    case Collective::kScatter:
    case Collective::kReduceScatter:
      return a.recv.count;
    case Collective::kBarrier:
      return 0;
    default:
      return a.send.count;
  }
}

// The merged state: the lowest rank seen and its call, the lowest seen rank whose call differs from it, and the
// lowest seen rank whose call is invalid with its reason. Only the reason's used bytes travel, so a valid call
// pays 8 bytes for it.
struct Summary {
  int32_t low = 0;
  int32_t bad = -1;
  CallDescriptor low_call;
  CallDescriptor bad_call;
  int32_t invalid = -1;
  uint32_t reason_bytes = 0;
  char reason[kMaxReasonBytes];

  std::size_t wire_bytes() const { return offsetof(Summary, reason) + reason_bytes; }
};

bool same(const CallDescriptor& a, const CallDescriptor& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void merge(Summary& m, const Summary& t) {
  // Order the two by their lowest rank; the result is relative to the lower one's call.
  const Summary& lo = m.low <= t.low ? m : t;
  const Summary& hi = m.low <= t.low ? t : m;
  Summary out = lo;
  int32_t cand = -1;
  CallDescriptor cand_call;
  if (!same(hi.low_call, lo.low_call)) {
    cand = hi.low, cand_call = hi.low_call;  // hi's lowest rank is the lowest of hi's that differ
  } else if (hi.bad >= 0) {
    cand = hi.bad, cand_call = hi.bad_call;
  }
  if (cand >= 0 && (out.bad < 0 || cand < out.bad)) out.bad = cand, out.bad_call = cand_call;
  if (hi.invalid >= 0 && (out.invalid < 0 || hi.invalid < out.invalid)) {
    out.invalid = hi.invalid, out.reason_bytes = hi.reason_bytes;
    std::memcpy(out.reason, hi.reason, hi.reason_bytes);
  }
  m = out;
}

std::string first_difference(const CallDescriptor& a, const CallDescriptor& b) {
  auto dt = [](uint8_t v) { return to_string(static_cast<DType>(v)); };
  auto op = [](uint8_t v) { return to_string(static_cast<ReduceOp>(v)); };
  if (a.collective != b.collective) {
    return fmt::format("collective {} vs {}", to_string(static_cast<Collective>(a.collective)),
                       to_string(static_cast<Collective>(b.collective)));
  }
  if (a.vector_variant != b.vector_variant) return "v-variant vs regular form";
  if (a.dtype != b.dtype) return fmt::format("dtype {} vs {}", dt(a.dtype), dt(b.dtype));
  if (a.count != b.count) return fmt::format("count {} vs {}", a.count, b.count);
  if (a.op != b.op) return fmt::format("op {} vs {}", op(a.op), op(b.op));
  if (a.root != b.root) return fmt::format("root {} vs {}", a.root, b.root);
  if (a.device != b.device) {
    return fmt::format("buffers on {} vs {} (one call's buffers must be on the same kind of memory on every rank: "
                       "device calls are cut into larger pieces)",
                       a.device ? "a device" : "host", b.device ? "a device" : "host");
  }
  return fmt::format("algorithm {} vs {}", a.algorithm, b.algorithm);
}

}  // namespace

CallDescriptor describe_call(const Args& args, const char* algorithm) {
  CallDescriptor d;
  Collective c = args.coll;
  d.collective = static_cast<uint8_t>(c);
  d.vector_variant = args.vector_variant ? 1 : 0;
  const Buffer& data = c == Collective::kScatter ? args.recv : args.send;  // the buffer every rank passes
  d.dtype = c == Collective::kBarrier ? 0 : static_cast<uint8_t>(data.dtype);
  d.count = args.vector_variant ? 0 : agreed_count(args);
  d.op = reducing(c) ? static_cast<uint8_t>(args.red.op) : 0;
  d.root = rooted(c) ? args.root : 0;
  std::strncpy(d.algorithm, algorithm, sizeof d.algorithm - 1);
  // The engine's piece size (device_pieces); 0 for calls of no elements (nothing to cut, and every rank's empty
  // buffers resolve to host memory).
  d.device = c != Collective::kBarrier && d.count > 0 && device_pieces(args) ? 1 : 0;
  return d;
}

std::string to_string(const CallDescriptor& d) {
  auto c = static_cast<Collective>(d.collective);
  std::string s = fmt::format("{}{}(dtype {}, count {}", to_string(c), d.vector_variant ? "_v" : "",
                              to_string(static_cast<DType>(d.dtype)), d.count);
  if (reducing(c)) s += fmt::format(", op {}", to_string(static_cast<ReduceOp>(d.op)));
  if (rooted(c)) s += fmt::format(", root {}", d.root);
  return s + fmt::format(", algorithm {}{})", d.algorithm, d.device ? ", device buffers" : "");
}

void check_calls_match(const Context& c, const CallDescriptor* mine, CheckRider* rider, std::string_view invalid) {
  if (c.view.slots != nullptr && rider == nullptr) return c.view.slots->exchange(c, mine, invalid, nullptr, 0);
  const int p = c.size();
  Summary s;
  s.low = c.rank();
  if (mine != nullptr) s.low_call = *mine;
  if (!invalid.empty()) {
    s.invalid = c.rank();
    s.reason_bytes = static_cast<uint32_t>(std::min(invalid.size(), kMaxReasonBytes));
    std::memcpy(s.reason, invalid.data(), s.reason_bytes);
  }
  // The dissemination rounds of agree(), with room after the summary for a rider's data. Both buffers stay
  // uninitialised beyond what is sent: only the stack is reserved.
  alignas(8) char out[sizeof(Summary) + kMaxRideBytes];
  alignas(8) char in[sizeof(Summary) + kMaxRideBytes];
  for (int k = 0; k < pattern::ceil_log2(p); ++k) {
    std::span<const char> ride = rider != nullptr ? rider->outgoing(k) : std::span<const char>();
    if (ride.size() > kMaxRideBytes) {
      throw Error(ErrorCode::kInternal, fmt::format("{}: {} bytes ride on the call check, more than the {} it carries",
                                                    c.what, ride.size(), kMaxRideBytes));
    }
    const std::size_t head = s.wire_bytes();
    std::memcpy(out, &s, head);
    if (!ride.empty()) std::memcpy(out + head, ride.data(), ride.size());
    const uint32_t step = kCheckStepBase + static_cast<uint32_t>(k);
    const int from = pattern::dissemination_from(c.rank(), p, k);
    auto r = c.irecv(from, step, in, sizeof in);
    auto w = c.isend(pattern::dissemination_to(c.rank(), p, k), step, out, head + ride.size());
    const std::size_t got = c.wait_received(r);
    c.wait(w);
    Summary theirs;
    if (got >= offsetof(Summary, reason)) std::memcpy(static_cast<void*>(&theirs), in, offsetof(Summary, reason));
    if (got < offsetof(Summary, reason) || theirs.reason_bytes > kMaxReasonBytes || got < theirs.wire_bytes()) {
      throw InvalidUsageError(fmt::format("{}: the call check (call #{} of this group) received {} bytes from rank {}, "
                                          "less than a call descriptor; that rank runs a different dcomm or has the "
                                          "check off (DCOMM_CHECK_CALLS must be alike on every rank)",
                                          c.what, c.seq, got, from));
    }
    std::memcpy(theirs.reason, in + offsetof(Summary, reason), theirs.reason_bytes);
    if (mine != nullptr) merge(s, theirs);
    const std::size_t their_head = theirs.wire_bytes();
    if (rider != nullptr) rider->arrived(k, std::span<const char>(in + their_head, got - their_head));
  }
  if (mine == nullptr) return;
  if (s.invalid >= 0) throw_invalid_call(c, s.invalid, std::string_view(s.reason, s.reason_bytes));
  if (s.bad >= 0) throw_mismatched_calls(c, s.bad, s.bad_call, s.low, s.low_call);
}

void throw_invalid_call(const Context& c, int rank, std::string_view reason) {
  // A caller mistake on one rank: every rank fails this call alike, so no rank's next call pairs with it.
  throw InvalidUsageError(fmt::format(
      "{}: call #{} of this group is invalid on rank {}: {}; every rank of the group fails this call with this "
      "error (no result was produced) and the group stays usable - fix the call on rank {}",
      c.what, c.seq, rank, reason, rank));
}

void throw_mismatched_calls(const Context& c, int bad, const CallDescriptor& bad_call, int low,
                            const CallDescriptor& low_call) {
  throw InvalidUsageError(fmt::format(
      "{}: mismatched collective calls (call #{} of this group): rank {} called {} but rank {} called {} ({}); "
      "every rank must issue the same collectives in the same order with the same dtype, count, op, root and "
      "algorithm",
      c.what, c.seq, bad, to_string(bad_call), low, to_string(low_call), first_difference(bad_call, low_call)));
}

}  // namespace dcomm::coll
