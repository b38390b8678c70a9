#include "rendezvous/identity.hpp"

#include <dcomm/error.hpp>

#include "common/env.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <climits>
#include <tuple>
#include <vector>

namespace dcomm::rdzv {
namespace {

// One launcher's variables. A family counts as present when any of its variables is set; only the first present
// family is read, because launchers nest (srun running torchrun) and their numbers mean different things.
struct Family {
  const char* name;
  std::vector<const char*> rank, world_size, local_rank, local_world_size, node_rank, node_count;
};

const std::vector<Family>& families() {
  // mpirun's OMPI_COMM_WORLD_NODE_RANK is not read: it ranks a process among all jobs' processes on its node
  // (a local rank), not the node among nodes; node fields come from the exchange instead.
  static const std::vector<Family> kFamilies = {
      {"dcomm-run", {"DCOMM_RANK"}, {"DCOMM_WORLD_SIZE"}, {"DCOMM_LOCAL_RANK"}, {"DCOMM_LOCAL_WORLD_SIZE"},
       {"DCOMM_NODE_RANK"}, {"DCOMM_NODE_COUNT"}},
      {"torchrun", {"RANK"}, {"WORLD_SIZE"}, {"LOCAL_RANK"}, {"LOCAL_WORLD_SIZE"}, {"GROUP_RANK", "NODE_RANK"},
       {"GROUP_WORLD_SIZE"}},
      {"mpirun", {"OMPI_COMM_WORLD_RANK"}, {"OMPI_COMM_WORLD_SIZE"}, {"OMPI_COMM_WORLD_LOCAL_RANK"},
       {"OMPI_COMM_WORLD_LOCAL_SIZE"}, {}, {}},
      {"slurm", {"SLURM_PROCID"}, {"SLURM_NTASKS"}, {"SLURM_LOCALID"}, {}, {"SLURM_NODEID"}, {"SLURM_NNODES"}},
  };
  return kFamilies;
}

bool family_present(const Family& f) {
  for (const auto* list : {&f.rank, &f.world_size, &f.local_rank, &f.local_world_size, &f.node_rank, &f.node_count}) {
    for (const char* v : *list) {
      if (env::get(v)) return true;
    }
  }
  return false;
}

// Sets *field from an option (>= 0) or, when unset, from the first variable in vars that is set.
void fill(int* field, std::string* origin, int option, const char* option_name, const std::vector<const char*>& vars) {
  if (option >= 0) {
    *field = option;
    *origin = fmt::format("InitOptions::{}", option_name);
    return;
  }
  if (option != -1) {
    throw InvalidUsageError(fmt::format("InitOptions::{} is {}; use a value >= 0, or -1 to take it from the "
                                        "environment",
                                        option_name, option));
  }
  for (const char* v : vars) {
    auto x = env::get_int(v);
    if (!x) continue;
    if (*x < INT_MIN || *x > INT_MAX) {
      throw InvalidUsageError(fmt::format("environment variable {}={} is out of range", v, *x));
    }
    *field = static_cast<int>(*x);
    *origin = fmt::format("{}={}", v, *x);
    return;
  }
}

}  // namespace

Identity resolve_partial_identity(const InitOptions& o, IdentityOrigins* origins) {
  const Family* family = nullptr;
  for (const Family& f : families()) {
    if (o.from_environment && family_present(f)) {
      family = &f;
      break;
    }
  }
  static const Family kNone{"none", {}, {}, {}, {}, {}, {}};
  const Family& f = family != nullptr ? *family : kNone;
  Identity id;
  fill(&id.rank, &origins->rank, o.rank, "rank", f.rank);
  fill(&id.world_size, &origins->world_size, o.world_size, "world_size", f.world_size);
  fill(&id.local_rank, &origins->local_rank, o.local_rank, "local_rank", f.local_rank);
  fill(&id.local_world_size, &origins->local_world_size, o.local_world_size, "local_world_size", f.local_world_size);
  fill(&id.node_rank, &origins->node_rank, o.node_rank, "node_rank", f.node_rank);
  fill(&id.node_count, &origins->node_count, o.node_count, "node_count", f.node_count);
  id.host_id = !o.host_id.empty() ? o.host_id : default_host_id();
  if (o.rank >= 0) {
    id.source = "explicit";
  } else if (id.rank >= 0) {
    id.source = f.name;
  } else {
    id.source = "dynamic";
  }
  return id;
}

std::optional<std::string> range_error(const Identity& id, const IdentityOrigins& w) {
  auto below = [](int value, const std::string& what, const std::string& origin, int bound,
                  const std::string& bound_what, const std::string& bound_origin) -> std::optional<std::string> {
    if (value < 0 || bound < 0 || value < bound) return std::nullopt;
    return fmt::format("{} {} ({}) must be below {} {} ({})", what, value, origin, bound_what, bound, bound_origin);
  };
  if (id.world_size == 0) return fmt::format("world size 0 ({}) must be at least 1", w.world_size);
  if (id.local_world_size == 0) return fmt::format("local world size 0 ({}) must be at least 1", w.local_world_size);
  if (id.node_count == 0) return fmt::format("node count 0 ({}) must be at least 1", w.node_count);
  if (auto e = below(id.rank, "rank", w.rank, id.world_size, "world size", w.world_size)) return e;
  if (auto e = below(id.local_rank, "local rank", w.local_rank, id.local_world_size, "local world size",
                     w.local_world_size)) {
    return e;
  }
  if (auto e = below(id.node_rank, "node rank", w.node_rank, id.node_count, "node count", w.node_count)) return e;
  for (auto [value, what, origin] : {std::tuple{id.local_world_size, "local world size", &w.local_world_size},
                                     std::tuple{id.node_count, "node count", &w.node_count}}) {
    if (value > 0 && id.world_size > 0 && value > id.world_size) {
      return fmt::format("{} {} ({}) exceeds world size {} ({})", what, value, *origin, id.world_size, w.world_size);
    }
  }
  if (id.host_id.empty() || id.host_id.find('\n') != std::string::npos) {
    return fmt::format("host id '{}' must be non-empty and on one line (DCOMM_HOST_ID or InitOptions::host_id)",
                       id.host_id);
  }
  return std::nullopt;
}

std::string default_host_id() {
  if (auto v = env::get("DCOMM_HOST_ID"); v && !v->empty()) return *v;
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  // "/proc/self/ns/net" reads "net:[4026531840]": the inode names the network namespace.
  char link[128] = {0};
  ssize_t n = ::readlink("/proc/self/ns/net", link, sizeof link - 1);
  std::string ns(link, n > 0 ? static_cast<std::size_t>(n) : 0);
  auto open = ns.find('[');
  auto close = ns.find(']');
  if (open != std::string::npos && close != std::string::npos && close > open) {
    return fmt::format("{}:{}", host, ns.substr(open + 1, close - open - 1));
  }
  return host;
}

}  // namespace dcomm::rdzv

namespace dcomm {

Identity resolve_identity(const InitOptions& options) {
  rdzv::IdentityOrigins origins;
  Identity id = rdzv::resolve_partial_identity(options, &origins);
  if (auto e = rdzv::range_error(id, origins)) {
    throw InvalidUsageError(fmt::format("resolve_identity ({}): {}", id.source, *e));
  }
  return id;
}

}  // namespace dcomm
