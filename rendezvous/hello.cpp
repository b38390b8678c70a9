#include "rendezvous/hello.hpp"

#include <dcomm/error.hpp>

#include "common/deadline.hpp"
#include "common/env.hpp"

#include <fmt/format.h>

namespace dcomm::rdzv {

std::string JobIdentity::describe() const {
  std::string size = world_size > 0 ? fmt::format("world size {}", world_size) : "world size unknown";
  if (run_id.empty()) return fmt::format("a job of unknown run id ({})", size);
  return fmt::format("job {} ({})", run_id, size);
}

std::string run_id_from_environment() {
  if (auto v = env::get("DCOMM_RUN_ID")) return "DCOMM_RUN_ID=" + *v;
  if (auto v = env::get("SLURM_JOB_ID")) {
    auto step = env::get("SLURM_STEP_ID");
    return fmt::format("SLURM_JOB_ID={}{}", *v, step ? "." + *step : "");
  }
  for (const char* name : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "TORCHELASTIC_RUN_ID"}) {
    if (auto v = env::get(name)) return fmt::format("{}={}", name, *v);
  }
  return "";
}

std::optional<std::string> job_mismatch(const JobIdentity& server, const JobIdentity& client) {
  bool ids_differ = !server.run_id.empty() && !client.run_id.empty() && server.run_id != client.run_id;
  bool sizes_differ = server.world_size > 0 && client.world_size > 0 && server.world_size != client.world_size;
  if (!ids_differ && !sizes_differ) return std::nullopt;
  return fmt::format("this store serves {} but the client belongs to {}: two jobs met on one store address; give "
                     "each job its own MASTER_PORT (or DCOMM_MASTER_PORT), or let dcomm-run pick a free port",
                     server.describe(), client.describe());
}

std::optional<FrameProblem> frame_problem(const proto::Header& h, bool authed, std::size_t max_frame) {
  if (h.code == 0 || h.code > proto::kMaxOp) return FrameProblem{fmt::format("unknown opcode {}", h.code)};
  auto op = static_cast<proto::Op>(h.code);
  if (!authed && op != proto::Op::kHello) {
    return FrameProblem{fmt::format("the first request must be hello, not {}", proto::to_string(op)), true};
  }
  if (!authed && h.length > kMaxHelloBytes) {
    return FrameProblem{fmt::format("a hello of {} exceeds the limit of {} before authentication",
                                    format_bytes(h.length), format_bytes(kMaxHelloBytes)),
                        true};
  }
  if (h.length > max_frame) {
    return FrameProblem{fmt::format("{} frame of {} exceeds the limit of {} (max_key_bytes + max_value_bytes + slack)",
                                    proto::to_string(op), format_bytes(h.length), format_bytes(max_frame))};
  }
  return std::nullopt;
}

proto::Bytes encode_hello(const Hello& h) {
  if (h.secret.size() > kMaxSecretBytes || h.job.run_id.size() > kMaxRunIdBytes) {
    throw InvalidUsageError(fmt::format("TCP store hello: the secret ({} bytes) must be at most {} bytes and the run "
                                        "id ({} bytes) at most {}",
                                        h.secret.size(), kMaxSecretBytes, h.job.run_id.size(), kMaxRunIdBytes));
  }
  return proto::Writer()
      .str(h.secret)
      .str(h.job.run_id)
      .i64(h.job.world_size)
      .frame(static_cast<uint8_t>(proto::Op::kHello));
}

Hello decode_hello(const uint8_t* payload, std::size_t n) {
  proto::Reader in(payload, n);
  Hello h;
  h.secret = in.str();
  if (!in.done()) {
    h.job.run_id = in.str();
    h.job.world_size = in.i64();
  }
  in.expect_done();
  if (h.secret.size() > kMaxSecretBytes) throw proto::ProtocolError{fmt::format("secret of {} bytes", h.secret.size())};
  if (h.job.run_id.size() > kMaxRunIdBytes) {
    throw proto::ProtocolError{fmt::format("run id of {} bytes", h.job.run_id.size())};
  }
  if (h.job.world_size < 0) throw proto::ProtocolError{fmt::format("world size {}", h.job.world_size)};
  return h;
}

}  // namespace dcomm::rdzv
