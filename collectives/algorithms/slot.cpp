// <collective>[slot], for every collective: one exchange through the group's shared-memory slots
// (collectives/slots.hpp), with the call check in the same cache lines. Each rank publishes what the others need
// of it, waits for every other rank's slot, and takes what it needs straight from them:
//   all_reduce, reduce, reduce_scatter: every rank publishes its input; each rank that needs a result combines the
//     P inputs in rank order (rank 0's first), so every rank computes the same bits;
//   broadcast, scatter: the root publishes the data, the others their call only;
//   all_gather, gather, all_to_all: every rank publishes its blocks and each rank copies the ones it needs;
//   barrier: the exchange itself.
// Slots take groups of one node (SlotChannel::create), host memory, regular (not v) calls whose published data fits
// a slot (kSlotBytes). Named for another call, it runs the check and then its collective's fallback (slot_fallback),
// and the cost model prices it so (cost_model.cpp).
// Cost: α/4 (a cache line each way instead of a message; no matching) plus the bytes read from the others'
// slots at β and those combined at γ.

#include <fmt/format.h>

#include <cstring>
#include <dcomm/error.hpp>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/slots.hpp"
#include "collectives/validate.hpp"

namespace dcomm::coll {

namespace {

// The bytes rank `rank` publishes for the call, as every rank can compute it (-1: the most any rank publishes).
[[gnu::always_inline]] inline std::size_t published_bytes(const Args& a, int size, int rank) {
  switch (a.coll) {
    case Collective::kAllReduce:
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return a.send.bytes();
    case Collective::kReduce:
    case Collective::kGather:
      return rank == a.root ? 0 : a.send.bytes();  // the root reads, nobody reads it
    case Collective::kBroadcast:
      return rank == a.root ? a.send.bytes() : 0;
    case Collective::kScatter:
      return rank == a.root ? a.recv.bytes() * static_cast<std::size_t>(size) : 0;
    case Collective::kBarrier:
      return 0;
  }
  return 0;
}

}  // namespace

bool slots_take(const Args& a, const GroupView& view) {
  return view.slots != nullptr && !a.vector_variant && a.send.device.is_host() && a.recv.device.is_host() &&
         published_bytes(a, view.size, a.root) <= kSlotBytes && published_bytes(a, view.size, -1) <= kSlotBytes;
}

// Whose slots this rank reads (SlotChannel::exchange): a rooted call's side that only sends reads none and returns
// once published; broadcast's and scatter's other ranks read the root's alone; everything else reads every slot.
int slots_read(const Args& a, int rank) {
  switch (a.coll) {
    case Collective::kBroadcast:
    case Collective::kScatter:
      return rank == a.root ? SlotChannel::kReadNone : a.root;
    case Collective::kReduce:
    case Collective::kGather:
      return rank == a.root ? SlotChannel::kReadAll : SlotChannel::kReadNone;
    default:
      return SlotChannel::kReadAll;
  }
}

bool plan_slot(const Args& a, const GroupView& view, const CallDescriptor* call, SlotPlan* plan) {
  if (!slots_take(a, view)) return false;
  *plan = view.slots->plan(fmt::format("{}[slot] rank {}/{}", to_string(a.coll), view.rank, view.size), call, {},
                           published_bytes(a, view.size, view.rank), slots_read(a, view.rank));
  return true;
}

const Algorithm& slot_fallback(Collective c) {
  static const Algorithm* const rows[] = {
      find_algorithm(Collective::kAllReduce, "butterfly"), find_algorithm(Collective::kBroadcast, "binomial"),
      find_algorithm(Collective::kReduce, "binomial"),     find_algorithm(Collective::kScatter, "binomial"),
      find_algorithm(Collective::kGather, "binomial"),     find_algorithm(Collective::kAllGather, "ring"),
      find_algorithm(Collective::kReduceScatter, "ring"),  find_algorithm(Collective::kAllToAll, "pairwise"),
      find_algorithm(Collective::kBarrier, "dissemination")};
  for (const Algorithm* a : rows) {
    if (a != nullptr && a->collective == c) return *a;
  }
  throw Error(ErrorCode::kInternal, fmt::format("{}[slot]: no fallback algorithm is registered", to_string(c)));
}

namespace {

// Combines the P inputs' elements [first, first + count) into `out`, rank 0's first.
void combine(const Context& c, SlotChannel& s, std::size_t bytes, std::size_t first, std::size_t count, char* out) {
  if (count == 0) return;
  copy_bytes(out, c.at(s.data(c, 0, bytes), first), count * c.esize());
  for (int q = 1; q < c.size(); ++q) c.reduce(out, c.at(s.data(c, q, bytes), first), count);
}

// reduce's root: the others' inputs from their slots, its own from `input` (it publishes none), in rank order.
void combine_at_root(const Context& c, SlotChannel& s, std::size_t bytes) {
  if (bytes == 0) return;
  alignas(64) char own[kSlotBytes];
  copy_bytes(own, c.input, bytes);
  const int r = c.rank();
  copy_bytes(c.work, r == 0 ? own : s.data(c, 0, bytes), bytes);
  for (int q = 1; q < c.size(); ++q) c.reduce(c.work, q == r ? own : s.data(c, q, bytes), c.work_count);
}

void run_slot(Context& c) {
  const Args& a = c.args;
  // A planned exchange exists only for a call the slots take.
  const bool planned = c.slot_plan != nullptr && c.slot_plan->checked == (c.call != nullptr);
  if (!planned && !slots_take(a, c.view)) {  // one rank, several nodes, device memory, or too large
    if (c.call != nullptr) check_calls_match(c, c.call);
    c.call = nullptr;
    const Algorithm& fallback = slot_fallback(a.coll);
    // The rows take their input where the caller left it; a fallback that does not starts from `work`.
    if (is_reducing(a.coll) && !fallback.takes_input && c.input != c.work) {
      c.copy(c.work, c.input, c.work_count);
      c.input = c.work;
    }
    return fallback.run(c);
  }
  SlotChannel& s = *c.view.slots;
  const int p = c.size();
  const int r = c.rank();
  const bool reducing = is_reducing(a.coll);
  // Reducing calls publish their input where it lies (takes_input: the engine copied nothing; pre-scaled into
  // `work` for premul_sum). Every result comes from the slots, so `work` may be the input itself (in place).
  const void* out = reducing ? c.input : a.send.data;
  const std::size_t mine = planned ? c.slot_plan->bytes : published_bytes(a, p, r);
  if (planned) {
    s.exchange(c, *c.slot_plan, out);  // the engine's plan for this shape (the same as below)
  } else {
    s.exchange(c, c.call, {}, out, mine, slots_read(a, r));
  }
  switch (a.coll) {
    case Collective::kAllReduce:
      return combine(c, s, mine, 0, c.work_count, c.work);
    case Collective::kReduce:
      if (r == a.root) combine_at_root(c, s, a.send.bytes());
      return;
    case Collective::kReduceScatter: {
      const std::size_t block = a.recv.count;
      return combine(c, s, mine, static_cast<std::size_t>(r) * block, block, c.at(c.work, static_cast<std::size_t>(r) * block));
    }
    case Collective::kBroadcast:
      if (r != a.root) copy_bytes(a.send.data, s.data(c, a.root, a.send.bytes()), a.send.bytes());
      return;
    case Collective::kScatter: {
      // The root's block from its own input (what it published), the others' from the root's slot.
      const std::size_t block = a.recv.bytes();
      const char* all = r == a.root ? static_cast<const char*>(a.send.data)
                                    : s.data(c, a.root, block * static_cast<std::size_t>(p));
      move_bytes(a.recv.data, all + static_cast<std::size_t>(r) * block, block);
      return;
    }
    case Collective::kAllGather:
    case Collective::kGather: {
      if (a.coll == Collective::kGather && r != a.root) return;
      const std::size_t block = a.send.bytes();
      auto* to = static_cast<char*>(a.recv.data);
      // gather's root publishes nothing: its own block comes from its input, first (the input may lie in the output).
      const bool own_first = a.coll == Collective::kGather;
      if (own_first) move_bytes(to + static_cast<std::size_t>(r) * block, a.send.data, block);
      for (int q = 0; q < p; ++q) {
        if (own_first && q == r) continue;
        move_bytes(to + static_cast<std::size_t>(q) * block, s.data(c, q, block), block);
      }
      return;
    }
    case Collective::kAllToAll: {
      const std::size_t block = a.send.bytes() / static_cast<std::size_t>(p);
      for (int q = 0; q < p; ++q) {
        move_bytes(static_cast<char*>(a.recv.data) + static_cast<std::size_t>(q) * block,
                   s.data(c, q, block * static_cast<std::size_t>(p)) + static_cast<std::size_t>(r) * block, block);
      }
      return;
    }
    case Collective::kBarrier:
      return;
  }
}

// n is the collective's model size (cost_model.hpp): what the slots carry, read by every rank.
double cost_slot_moving(const CostParams& p, double n, int /*size*/) { return p.alpha / 4 + n * p.beta; }
double cost_slot_reducing(const CostParams& p, double n, int size) {
  return p.alpha / 4 + (size - 1) * n * (p.beta + p.gamma);
}

constexpr const char* kMoves = "one node: one exchange through shared-memory slots, the call check in the same lines";
constexpr const char* kReduces =
    "one node: every rank reads all inputs from shared-memory slots, reduces in rank order";

#define DCOMM_SLOT_ROW(coll, description, cost) \
  Registration{{coll, "slot", description, supports_regular, run_slot, cost, /*fuses_check=*/true,          \
                /*by_name_only=*/false, /*takes_input=*/true, /*uses_slots=*/true}}

const Registration kRows[] = {
    DCOMM_SLOT_ROW(Collective::kAllReduce, kReduces, cost_slot_reducing),
    DCOMM_SLOT_ROW(Collective::kReduce, kReduces, cost_slot_reducing),
    DCOMM_SLOT_ROW(Collective::kReduceScatter, kReduces, cost_slot_reducing),
    DCOMM_SLOT_ROW(Collective::kBroadcast, kMoves, cost_slot_moving),
    DCOMM_SLOT_ROW(Collective::kScatter, kMoves, cost_slot_moving),
    DCOMM_SLOT_ROW(Collective::kGather, kMoves, cost_slot_moving),
    DCOMM_SLOT_ROW(Collective::kAllGather, kMoves, cost_slot_moving),
    DCOMM_SLOT_ROW(Collective::kAllToAll, kMoves, cost_slot_moving),
    DCOMM_SLOT_ROW(Collective::kBarrier, kMoves, cost_slot_moving),
};

#undef DCOMM_SLOT_ROW

}  // namespace

}  // namespace dcomm::coll
