#include "transports/ucx/ucx_worker.hpp"

#include <fmt/format.h>

#include <dcomm/error.hpp>

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

}  // namespace

std::string status_text(ucs_status_t status) { return ucs_status_string(status); }

UcxWorker::UcxWorker(const std::string& who) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) fail_setup(who, "ucp_config_read", st);

  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG;
  params.mt_workers_shared = 0;
  st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK) fail_setup(who, "ucp_init", st);

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
