#include "rendezvous/exchange.hpp"

#include <dcomm/error.hpp>

#include "common/deadline.hpp"
#include "rendezvous/member.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace dcomm::rdzv {
namespace {

std::string member_key(int64_t j) { return fmt::format("rdzv/member/{}", j); }

// "; rank(s) 2, 3 never joined" when every process that joined declared its rank (a launcher's world), else "".
std::string missing_ranks(Store& store, int64_t joined, int world_size) {
  std::vector<bool> present(static_cast<std::size_t>(world_size), false);
  for (int64_t i = 0; i < std::min<int64_t>(joined, world_size); ++i) {
    std::string key = member_key(i);
    if (!store.check({key})) return {};
    int r = decode_member(store.get_string(key), key).declared.rank;
    if (r < 0 || r >= world_size) return {};
    present[static_cast<std::size_t>(r)] = true;
  }
  std::string out;
  for (int r = 0; r < world_size; ++r) {
    if (!present[static_cast<std::size_t>(r)]) out += fmt::format("{}{}", out.empty() ? "" : ", ", r);
  }
  return out.empty() ? std::string() : fmt::format("; rank(s) {} never joined", out);
}

// Reads record j, waiting for it until the deadline; a timeout names how many processes joined, and which.
Member read_member(Store& store, int64_t j, int world_size, const Deadline& deadline, const FailureWatch& watch) {
  std::string key = member_key(j);
  try {
    wait_watching_failures(store, {key}, deadline, watch, fmt::format("rendezvous on {}", store.describe()));
  } catch (const TimeoutError&) {
    int64_t joined = store.add(kJoinedKey, 0);
    throw TimeoutError(fmt::format(
        "rendezvous on {}: {}/{} ranks joined after {} (timeout {}){}; the missing processes may not have "
        "started, may have failed, or may use another store - check that every process was launched with the "
        "same MASTER_ADDR/MASTER_PORT, DCOMM_RUN_ID and world size",
        store.describe(), std::min<int64_t>(joined, world_size), world_size, format_duration(deadline.elapsed()),
        format_duration(deadline.timeout()), missing_ranks(store, joined, world_size)));
  }
  return decode_member(store.get_string(key), key);
}

}  // namespace

Joined join_world(const Identity& declared, const std::string& own_error, Store& store, Duration timeout,
                  const FailureWatch& watch) {
  const int n = declared.world_size;
  if (n <= 0) {
    throw InvalidUsageError(fmt::format("rendezvous: the world size is unknown ({}); set InitOptions::world_size, "
                                        "DCOMM_WORLD_SIZE or WORLD_SIZE, or launch with dcomm-run, torchrun, mpirun "
                                        "or srun",
                                        own_error.empty() ? "not set" : own_error));
  }
  Deadline deadline = Deadline::after(timeout);
  Member me = make_member(declared, own_error);
  int64_t j = store.add(kJoinedKey, 1) - 1;
  store.set(member_key(j), encode_member(me));
  if (!own_error.empty()) throw InvalidUsageError(fmt::format("rendezvous: {} cannot join: {}", me.describe(), own_error));

  // Read the first world_size records (ours included), failing at the first conflict they show.
  std::vector<Member> members;
  for (int64_t i = 0; i < n; ++i) {
    members.push_back(i == j ? me : read_member(store, i, n, deadline, watch));
    if (auto conflict = early_conflict(members)) throw InvalidUsageError("rendezvous: " + *conflict);
  }
  if (j >= n) {
    members.push_back(me);
    if (auto conflict = early_conflict(members)) throw InvalidUsageError("rendezvous: " + *conflict);
    throw InvalidUsageError(fmt::format(
        "rendezvous on {}: {} joined as process {} of a world of {}: more processes were started than the world "
        "size, or an earlier run's processes share this store (set a distinct DCOMM_RUN_ID)",
        store.describe(), me.describe(), j + 1, n));
  }
  std::vector<Identity> ids = assign_identities(members);
  return Joined{ids[static_cast<std::size_t>(j)], members.front().nonce};
}

}  // namespace dcomm::rdzv
