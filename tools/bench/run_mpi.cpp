#include "tools/bench/run_mpi.hpp"

#include <fmt/format.h>

#include <climits>
#include <stdexcept>

#include "tools/bench/mpi_boot.hpp"

namespace dcomm::bench {
namespace {

constexpr int kPingTag = 7;

// 16-bit floats move as raw 16-bit words; MPI 3.1 has no arithmetic on them.
MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::kInt8: return MPI_INT8_T;
    case DType::kUInt8: return MPI_UINT8_T;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kUInt32: return MPI_UINT32_T;
    case DType::kInt64: return MPI_INT64_T;
    case DType::kUInt64: return MPI_UINT64_T;
    case DType::kFloat16:
    case DType::kBFloat16: return MPI_UINT16_T;
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

// MPI_OP_NULL: no MPI equivalent (avg and premul_sum are dcomm's).
MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kProd: return MPI_PROD;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kBAnd: return MPI_BAND;
    case ReduceOp::kBOr: return MPI_BOR;
    case ReduceOp::kBXor: return MPI_BXOR;
    case ReduceOp::kAvg:
    case ReduceOp::kPreMulSum: return MPI_OP_NULL;
  }
  return MPI_OP_NULL;
}

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(fmt::format("{} failed: {}", call, text));
}

class MpiLibrary : public Library {
 public:
  MpiLibrary(const ProcessGroupPtr& pg, Duration timeout) : session_(pg, timeout) {}
  std::string name() const override { return "mpi"; }

  std::string unsupported(const Case& c) const override {
    if (!c.device.is_host()) return "this OpenMPI peer runs on host buffers only";
    if (c.layout.send_count > INT_MAX || c.layout.recv_count > INT_MAX) return "count exceeds MPI's int";
    if (!is_reducing(c.coll)) return "";
    if (mpi_op(c.op) == MPI_OP_NULL) return fmt::format("MPI has no {} op", to_string(c.op));
    if (c.dtype == DType::kFloat16 || c.dtype == DType::kBFloat16) {
      return fmt::format("MPI has no {} arithmetic", to_string(c.dtype));
    }
    if (c.coll == Coll::kReduceScatter && c.inplace) return "MPI's in-place reduce_scatter keeps the result in block 0";
    return "";
  }

  void barrier(const Case&) override { check(MPI_Barrier(session_.comm()), "MPI_Barrier"); }

  void run_once(const Case& c, const Workspace& ws) override {
    MPI_Comm comm = session_.comm();
    const MPI_Datatype t = mpi_type(c.dtype);
    void* s = ws.send().data;
    void* r = ws.recv().data;
    const int n = static_cast<int>(c.layout.send_count);
    const int block = static_cast<int>(c.layout.block);
    const bool root = c.rank == c.root;
    void* in = c.inplace ? MPI_IN_PLACE : s;  // dcomm's in-place views alias; MPI wants MPI_IN_PLACE instead
    switch (c.coll) {
      case Coll::kAllReduce: return check(MPI_Allreduce(in, r, n, t, mpi_op(c.op), comm), "MPI_Allreduce");
      case Coll::kBroadcast: return check(MPI_Bcast(r, n, t, c.root, comm), "MPI_Bcast");
      case Coll::kReduce:
        return check(MPI_Reduce(root ? in : s, r, n, t, mpi_op(c.op), c.root, comm), "MPI_Reduce");
      case Coll::kScatter:
        return check(MPI_Scatter(s, block, t, c.inplace && root ? MPI_IN_PLACE : r, block, t, c.root, comm),
                     "MPI_Scatter");
      case Coll::kGather:
        return check(MPI_Gather(c.inplace && root ? MPI_IN_PLACE : s, block, t, r, block, t, c.root, comm),
                     "MPI_Gather");
      case Coll::kAllGather: return check(MPI_Allgather(in, block, t, r, block, t, comm), "MPI_Allgather");
      case Coll::kReduceScatter:
        return check(MPI_Reduce_scatter_block(s, r, block, t, mpi_op(c.op), comm), "MPI_Reduce_scatter_block");
      case Coll::kAllToAll: return check(MPI_Alltoall(in, block, t, r, block, t, comm), "MPI_Alltoall");
      case Coll::kBarrier: return check(MPI_Barrier(comm), "MPI_Barrier");
      case Coll::kSendRecv: return ping_pong(c, s, r, t, n);
    }
  }

 private:
  void ping_pong(const Case& c, void* s, void* r, MPI_Datatype t, int n) {
    const int partner = sendrecv_partner(c.rank, c.world);
    if (partner < 0) return;
    MPI_Comm comm = session_.comm();
    if (c.rank < partner) {
      check(MPI_Send(s, n, t, partner, kPingTag, comm), "MPI_Send");
      check(MPI_Recv(r, n, t, partner, kPingTag, comm, MPI_STATUS_IGNORE), "MPI_Recv");
    } else {
      check(MPI_Recv(r, n, t, partner, kPingTag, comm, MPI_STATUS_IGNORE), "MPI_Recv");
      check(MPI_Send(s, n, t, partner, kPingTag, comm), "MPI_Send");
    }
  }

  MpiSession session_;
};

}  // namespace

std::unique_ptr<Library> make_mpi_library(ProcessGroupPtr pg, double timeout_s) {
  return std::make_unique<MpiLibrary>(pg, std::chrono::duration_cast<Duration>(std::chrono::duration<double>(timeout_s)));
}

}  // namespace dcomm::bench
