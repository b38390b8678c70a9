#pragma once
// One UCP context and one worker for this rank, with the worker's address and a "drop" datatype that discards
// whatever is unpacked into it (discard() receives into it, so dropping a many-GiB message allocates nothing).
//
// Configuration comes from UCX itself: ucp_config_read() reads UCX_TLS, UCX_NET_DEVICES and every other UCX_*
// variable. dcomm changes one default only, where the network is TCP and UCX_RNDV_THRESH is unset: messages up to
// 1 MiB go eager (ucx_worker.cpp says why). The worker runs in UCS_THREAD_MODE_SERIALIZED: Mesh serialises every
// call under its lock, but the calls may come from different threads (a Work waited on by another thread), which
// UCS_THREAD_MODE_SINGLE does not allow.
//
// The memory types UCX can move (ucp_context_query's memory_types: host always, CUDA only when UCX was built with
// CUDA and its cuda transports are enabled) are read once at setup; the transport moves device buffers only when
// UCX reports their type.

#include <ucp/api/ucp.h>

#include <string>

#include <dcomm/store.hpp>

namespace dcomm::transport::ucx {

/// "Connection reset by remote peer": UCX's words for a status.
std::string status_text(ucs_status_t status);

/// "host, cuda": the names of the memory types in a ucp_context_attr_t::memory_types mask.
std::string memory_type_names(uint64_t mask);

class UcxWorker {
 public:
  /// `who` names this rank in error messages ("rank 2/4").
  explicit UcxWorker(const std::string& who);
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_worker_h get() const { return worker_; }
  /// The worker's address, as peers pass it to ucp_ep_create.
  Store::Bytes address() const;
  /// A datatype whose unpack drops the data; count is in bytes.
  ucp_datatype_t drop_datatype() const { return drop_; }
  /// The memory types UCX reports for this context, a mask of UCS_BIT(ucs_memory_type_t).
  uint64_t memory_types() const { return memory_types_; }
  bool supports(ucs_memory_type_t type) const { return (memory_types_ & UCS_BIT(type)) != 0; }
  /// One ucp_worker_progress() call; returns how many events it handled.
  unsigned progress() { return ucp_worker_progress(worker_); }

 private:
  void destroy() noexcept;

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_address_t* address_ = nullptr;
  std::size_t address_bytes_ = 0;
  ucp_datatype_t drop_ = 0;
  bool have_drop_ = false;
  uint64_t memory_types_ = UCS_BIT(UCS_MEMORY_TYPE_HOST);
};

}  // namespace dcomm::transport::ucx
