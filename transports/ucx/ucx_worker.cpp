#include "transports/ucx/ucx_worker.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <dcomm/error.hpp>
#include <filesystem>
#include <mutex>

#include "common/log.hpp"

namespace dcomm::transport::ucx {
namespace {

// The drop datatype's state is the message length: UCX asks packed_size() how many bytes to expect.
void* drop_start_unpack(void*, void*, size_t count) { return reinterpret_cast<void*>(static_cast<uintptr_t>(count)); }
void* drop_start_pack(void*, const void*, size_t count) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(count));
}
size_t drop_packed_size(void* state) { return static_cast<size_t>(reinterpret_cast<uintptr_t>(state)); }
size_t drop_pack(void*, size_t, void*, size_t) { return 0; }
ucs_status_t drop_unpack(void*, size_t, const void*, size_t) { return UCS_OK; }
void drop_finish(void*) {}

const ucp_generic_dt_ops_t kDropOps = {drop_start_pack, drop_start_unpack, drop_packed_size,
                                       drop_pack,       drop_unpack,       drop_finish};

[[noreturn]] void fail_setup(const std::string& who, const char* call, ucs_status_t status) {
  throw Error(ErrorCode::kSystemError,
              fmt::format("ucx transport {}: {} failed: UCX reported {}; check UCX_TLS and UCX_NET_DEVICES "
                          "(`ucx_info -d` lists the devices UCX can use)",
                          who, call, status_text(status)));
}

// Reads and logs (at INFO, once per process: every context of a process reads the same UCX_* configuration) the
// memory types UCX can move. A failed query leaves host only, the one type every UCX build moves.
uint64_t query_memory_types(ucp_context_h context, const std::string& who) {
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  ucs_status_t st = ucp_context_query(context, &attr);
  const uint64_t types =
      st == UCS_OK ? (attr.memory_types | UCS_BIT(UCS_MEMORY_TYPE_HOST)) : UCS_BIT(UCS_MEMORY_TYPE_HOST);
  static std::once_flag logged;
  std::call_once(logged, [&] {
    if (st != UCS_OK) {
      DCOMM_INFO("ucx {}: ucp_context_query failed ({}); assuming UCX moves host memory only", who, status_text(st));
    } else {
      DCOMM_INFO("ucx {}: UCX reports memory types: {}; the ucx transport moves {}", who, memory_type_names(types),
                 (types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0 ? "host and CUDA device buffers" : "host buffers only");
    }
  });
  return types;
}

// Above the collectives' default pipelining chunk (512 KiB), so every piece of a pipelined algorithm goes eager.
constexpr const char* kTcpEagerLimit = "1m";

// UCX's rendezvous over TCP (RTS, then the receiver's RTR, then the data) serialises a pair's two directions: both
// ride one socket, and the RTR a rank sends for an incoming message waits behind its own outgoing data queued on
// that socket. A pair exchanging at once (every rail of the hierarchical algorithms, a two-rank ring) then moves at
// half the link (2 namespaces at 1 Gbit/s: 48 % of the link each way with UCX's 8 KiB threshold, 89-93 % eager;
// docs/transports-ucx.md). Eager data needs no RTR and streams both ways. So where the network is TCP (no RDMA
// device: /sys/class/infiniband empty) and the user set no threshold, messages up to kTcpEagerLimit go eager;
// larger ones keep rendezvous, which bounds what UCX buffers for a late receiver to one such message each. Over
// RDMA, rendezvous is zero-copy and stays as UCX sets it.
void prefer_eager_over_tcp(ucp_config_t* config, const std::string& who) {
  std::error_code ec;
  const bool rdma = !std::filesystem::is_empty("/sys/class/infiniband", ec) && !ec;
  if (rdma || std::getenv("UCX_RNDV_THRESH") != nullptr) return;
  const ucs_status_t st = ucp_config_modify(config, "RNDV_THRESH", kTcpEagerLimit);
  static std::once_flag logged;
  std::call_once(logged, [&] {
    DCOMM_INFO("ucx {}: no RDMA device, so the network is TCP: {} messages up to {} eager (UCX_RNDV_THRESH sets it)",
               who, st == UCS_OK ? "sending" : "could not set", kTcpEagerLimit);
  });
}

}  // namespace

std::string status_text(ucs_status_t status) { return ucs_status_string(status); }

std::string memory_type_names(uint64_t mask) {
  std::string out;
  for (int t = UCS_MEMORY_TYPE_HOST; t < UCS_MEMORY_TYPE_LAST; ++t) {
    if ((mask & UCS_BIT(t)) == 0) continue;
    if (!out.empty()) out += ", ";
    out += ucs_memory_type_names[t];
  }
  return out.empty() ? "none" : out;
}

UcxWorker::UcxWorker(const std::string& who) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) fail_setup(who, "ucp_config_read", st);
  prefer_eager_over_tcp(config, who);

  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG;
  params.mt_workers_shared = 0;
  st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK) fail_setup(who, "ucp_init", st);
  memory_types_ = query_memory_types(context_, who);

  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  st = ucp_worker_create(context_, &wparams, &worker_);
  if (st == UCS_OK) st = ucp_worker_get_address(worker_, &address_, &address_bytes_);
  if (st == UCS_OK) st = ucp_dt_create_generic(&kDropOps, nullptr, &drop_);
  if (st != UCS_OK) {
    destroy();
    fail_setup(who, "creating the UCP worker", st);
  }
  have_drop_ = true;
}

UcxWorker::~UcxWorker() { destroy(); }

Store::Bytes UcxWorker::address() const {
  const auto* p = reinterpret_cast<const uint8_t*>(address_);
  return Store::Bytes(p, p + address_bytes_);
}

void UcxWorker::destroy() noexcept {
  if (have_drop_) ucp_dt_destroy(drop_);
  have_drop_ = false;
  if (address_ != nullptr) ucp_worker_release_address(worker_, address_);
  address_ = nullptr;
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  worker_ = nullptr;
  if (context_ != nullptr) ucp_cleanup(context_);
  context_ = nullptr;
}

}  // namespace dcomm::transport::ucx
