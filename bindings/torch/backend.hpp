#pragma once
// The "dcomm" backend of torch.distributed: a c10d::ProcessGroup whose calls run on a dcomm ProcessGroup.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <dcomm/process_group.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "work.hpp"

namespace dcomm_torch {

class DcommBackend : public c10d::ProcessGroup {
 public:
  /// Over `pg` (join_group's), the group's rank and size; `timeout` bounds each call that names none.
  DcommBackend(dcomm::ProcessGroupPtr pg, int rank, int size, std::chrono::milliseconds timeout);
  ~DcommBackend() override;

  const std::string getBackendName() const override { return "dcomm"; }
  /// The dcomm group underneath (for explain() and set_algorithm() from Python).
  const dcomm::ProcessGroupPtr& group() const { return pg_; }
  /// How many dcomm collectives this group has issued (a coalesced torch call is one).
  uint64_t collective_calls() const { return collective_calls_.load(); }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

 private:
  // A Work over `works`, running `finish` after they succeed; `outputs` become result() and the future's value.
  c10::intrusive_ptr<c10d::Work> make_work(c10d::OpType type, std::vector<dcomm::WorkPtr> works,
                                           std::function<void()> finish, std::vector<at::Tensor> outputs);
  // Runs one dcomm call (which may block: host collectives run inline), giving its errors torch's words.
  dcomm::WorkPtr issue(const std::function<dcomm::WorkPtr()>& call);
  // Options for one collective: async, with torch's timeout (or the group's) and the tensor's current stream.
  dcomm::CollectiveOptions options(std::chrono::milliseconds timeout, const at::Tensor& t);
  c10::intrusive_ptr<c10d::Work> point_to_point(std::vector<at::Tensor>& tensors, int peer, int tag, bool is_send);

  dcomm::ProcessGroupPtr pg_;
  std::shared_ptr<Poller> poller_;
  std::atomic<uint64_t> seq_{0};
  std::atomic<uint64_t> collective_calls_{0};
  dcomm::Duration timeout_;  // torch's timeout for this group (a subgroup's world may have another)
  std::size_t async_bytes_;  // host calls above this hand off to dcomm's worker (DCOMM_TORCH_ASYNC_BYTES)
};

}  // namespace dcomm_torch
