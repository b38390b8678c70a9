// Which memory the ucx transport moves: host always, CUDA device memory exactly when UCX itself reports
// UCS_MEMORY_TYPE_CUDA. The expected answer comes from a UCP context of the test's own (same UCX_* configuration),
// never from a hard-coded one, so the test holds for UCX builds with and without CUDA.
#include <catch2/catch.hpp>

#include <ucp/api/ucp.h>

#include <dcomm/error.hpp>

#include "tests/ucx/ucx_world.hpp"
#include "transports/registry.hpp"
#include "transports/ucx/ucx_worker.hpp"

using namespace dcomm;
using dcomm::test::join;
using dcomm::test::run_ucx_world;
using dcomm::test::UcxRank;

namespace {

// The memory types a fresh UCP context with the tag feature reports, as the transport's own context does.
uint64_t ucx_memory_types() {
  ucp_config_t* config = nullptr;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) throw std::runtime_error("ucp_config_read failed");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG;
  ucp_context_h context = nullptr;
  ucs_status_t st = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (st != UCS_OK) throw std::runtime_error("ucp_init failed");
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  st = ucp_context_query(context, &attr);
  ucp_cleanup(context);
  if (st != UCS_OK) throw std::runtime_error("ucp_context_query failed");
  return attr.memory_types;
}

}  // namespace

TEST_CASE("ucx moves CUDA device buffers exactly when UCX reports CUDA memory", "[ucx]") {
  const uint64_t types = ucx_memory_types();
  const bool cuda = (types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  INFO("UCX reports memory types: " << transport::ucx::memory_type_names(types));
  CHECK((types & UCS_BIT(UCS_MEMORY_TYPE_HOST)) != 0);

  transport::TransportContext ctx;
  ctx.self.rank = 0;
  ctx.world_size = 2;
  auto t = transport::make_ucx_transport(ctx);
  CHECK(t->supports_device(Device::host()));
  CHECK(t->supports_device(Device::cuda(0)) == cuda);
  CHECK(t->supports_device(Device::cuda(3)) == cuda);
  t->close();
}

TEST_CASE("without CUDA support in UCX, device buffers are refused before any I/O, naming what UCX reports",
          "[ucx]") {
  if ((ucx_memory_types() & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0) {
    WARN("this UCX moves CUDA memory; the refusal cannot be tested here (the cuda suite covers device buffers)");
    return;
  }
  auto failures = run_ucx_world(2, [](UcxRank& r) {
    const int other = 1 - r.rank();
    uint8_t byte = static_cast<uint8_t>(r.rank() + 1);
    auto op = std::make_shared<transport::Op>();
    try {
      r.transport().isend(other, 7, &byte, 1, Device::cuda(0), op);
      r.fail("a send from cuda:0 was accepted by a UCX without CUDA support");
    } catch (const InvalidUsageError& e) {
      if (std::string(e.what()).find("moves host memory only") == std::string::npos) {
        r.fail(std::string("refusal does not say why: ") + e.what());
      }
    }
    if (op->done()) r.fail("the refused send's op completed");
    // The transport still works for host memory afterwards, and a device receive of a real message is refused.
    r.wait(r.send(other, 8, &byte, 1));
    transport::Incoming msg = r.next();
    auto recv_op = std::make_shared<transport::Op>();
    uint8_t got = 0;
    try {
      r.transport().receive(msg, &got, Device::cuda(0), recv_op);
      r.fail("a receive into cuda:0 was accepted by a UCX without CUDA support");
    } catch (const InvalidUsageError&) {
    }
    r.receive(msg, &got);
    if (got != static_cast<uint8_t>(other + 1)) r.fail("host message after the refusals is wrong");
  });
  INFO(join(failures));
  CHECK(failures.empty());
}

TEST_CASE("memory type names", "[ucx]") {
  using transport::ucx::memory_type_names;
  CHECK(memory_type_names(UCS_BIT(UCS_MEMORY_TYPE_HOST)) == "host");
  CHECK(memory_type_names(UCS_BIT(UCS_MEMORY_TYPE_HOST) | UCS_BIT(UCS_MEMORY_TYPE_CUDA)) == "host, cuda");
  CHECK(memory_type_names(0) == "none");
}
