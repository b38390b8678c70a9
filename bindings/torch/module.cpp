// The Python module dcomm_torch: importing it registers the torch.distributed backend "dcomm".

#include <dcomm/dcomm.hpp>

#include <pybind11/chrono.h>
#include <pybind11/eval.h>
#include <torch/csrc/utils/pybind.h>

#include "backend.hpp"
#include "groups.hpp"
#include "store_adapter.hpp"

namespace py = pybind11;

namespace {

// torch calls the creator for the world and for every new_group, on the group's members only, with the members'
// global ranks (register_backend's extended_api). Joining blocks until the group's ranks have all arrived, so the
// GIL is released meanwhile.
c10::intrusive_ptr<c10d::ProcessGroup> create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                              std::chrono::milliseconds timeout, std::vector<int> global_ranks,
                                              const std::string& name) {
  py::gil_scoped_release no_gil;
  auto pg = dcomm_torch::join_group(store, rank, size, timeout, std::move(global_ranks), name);
  return c10::make_intrusive<dcomm_torch::DcommBackend>(std::move(pg), rank, size, timeout);
}

}  // namespace

PYBIND11_MODULE(dcomm_torch, m) {
  m.doc() = "dcomm as a torch.distributed backend: `import dcomm_torch` registers the backend \"dcomm\".";
  py::module_ dist = py::module_::import("torch.distributed");
  // The class is registered so that torch's bindings see the ProcessGroup the creator returns as one.
  py::class_<dcomm_torch::DcommBackend, c10d::ProcessGroup, c10::intrusive_ptr<dcomm_torch::DcommBackend>>(
      m, "ProcessGroupDcomm")
      .def("explain",
           [](const dcomm_torch::DcommBackend& pg, const std::string& collective, std::size_t bytes) {
             dcomm::Collective c;
             if (!dcomm::parse_collective(collective, &c)) {
               throw py::value_error("unknown collective '" + collective + "' (all_reduce, broadcast, ...)");
             }
             return pg.group()->explain(c, bytes);
           },
           py::arg("collective"), py::arg("bytes"),
           "Each algorithm's predicted time for `bytes` on this group, and dcomm's choice.")
      .def("collective_calls", &dcomm_torch::DcommBackend::collective_calls,
           "How many dcomm collectives this group has issued (a coalesced torch call is one).");
  m.def("_create_process_group", &create, py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::arg("global_ranks"), py::arg("name"));
  // For the suite (tests/torch/test_store.py): dcomm's store calls through the adapter over a torch store.
  m.def(
      "_store_wait",
      [](const c10::intrusive_ptr<c10d::Store>& store, const std::vector<std::string>& keys,
         std::chrono::milliseconds timeout) {
        py::gil_scoped_release no_gil;
        dcomm_torch::adapt_store(store, "a test's store")->wait(keys, timeout);
      },
      py::arg("store"), py::arg("keys"), py::arg("timeout"));
  m.def(
      "_store_get",
      [](const c10::intrusive_ptr<c10d::Store>& store, const std::string& key) {
        std::vector<uint8_t> v;
        {
          py::gil_scoped_release no_gil;
          v = dcomm_torch::adapt_store(store, "a test's store")->get(key);
        }
        return py::bytes(reinterpret_cast<const char*>(v.data()), v.size());
      },
      py::arg("store"), py::arg("key"));
  m.attr("__version__") = dcomm::version();
  // torch 1.13's dist.monitored_barrier() refuses every backend but gloo before asking the group; let it ask a
  // dcomm group too (the group's monitoredBarrier names the ranks that did not arrive).
  py::exec(R"(
import torch.distributed as _dist
import torch.distributed.distributed_c10d as _c10d
_gloo_only_monitored_barrier = _c10d.monitored_barrier
def monitored_barrier(group=_c10d.GroupMember.WORLD, timeout=None, wait_all_ranks=False):
    if not _c10d._rank_not_in_group(group) and _c10d.get_backend(group) == "dcomm":
        group_to_use = _c10d._get_default_group() if group is None else group
        return group_to_use.monitored_barrier(_c10d.default_pg_timeout if timeout is None else timeout,
                                              wait_all_ranks=wait_all_ranks)
    return _gloo_only_monitored_barrier(group, timeout, wait_all_ranks)
monitored_barrier.__doc__ = _gloo_only_monitored_barrier.__doc__
_c10d.monitored_barrier = monitored_barrier
_dist.monitored_barrier = monitored_barrier
)", m.attr("__dict__"));
  // Registered with extended_api, so that torch passes the members' global ranks and the group's name.
  py::exec(R"(
import torch.distributed as _dist
def _create(opts, pg_options):
    return _create_process_group(opts.store, opts.group_rank, opts.group_size, opts.timeout,
                                 list(opts.global_ranks_in_group), str(opts.group_id))
if "DCOMM" not in _dist.Backend._plugins:
    _dist.Backend.register_backend("dcomm", _create, extended_api=True)
)", m.attr("__dict__"));
}
