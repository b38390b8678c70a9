#include <fmt/format.h>

#include "tests/transports/conformance.hpp"

namespace dcomm::test {

std::vector<uint8_t> make_payload(int src, int dst, uint64_t salt, std::size_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i) v[i] = pattern(src, dst, salt, i);
  return v;
}

long long first_mismatch(const uint8_t* data, int src, int dst, uint64_t salt, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) {
    if (data[i] != pattern(src, dst, salt, i)) return static_cast<long long>(i);
  }
  return -1;
}

bool wait_ok(transport::Mesh& mesh, transport::Request& r, RankLog& log, const std::string& what) {
  try {
    mesh.wait(r, Deadline::after(std::chrono::seconds(60)), fmt::format("rank {} {}", mesh.rank(), what));
    return true;
  } catch (const std::exception& e) {
    log.failures.push_back(e.what());
    return false;
  }
}

void barrier(transport::Mesh& mesh, uint64_t tag, RankLog& log) {
  std::vector<transport::RequestPtr> reqs;
  for (int p = 0; p < mesh.size(); ++p) {
    if (p == mesh.rank()) continue;
    reqs.push_back(mesh.irecv(p, tag, nullptr, 0));
    reqs.push_back(mesh.isend(p, tag, nullptr, 0));
  }
  for (auto& r : reqs) wait_ok(mesh, *r, log, "barrier");
}

void run_conformance(transport::Mesh& mesh, RankLog& log) {
  for (const auto& c : conformance_cases()) {
    if (mesh.size() < c.min_world) continue;
    std::size_t before = log.failures.size();
    try {
      c.body(mesh, log);
    } catch (const std::exception& e) {
      log.failures.push_back(fmt::format("threw: {}", e.what()));
    }
    for (std::size_t i = before; i < log.failures.size(); ++i) {
      log.failures[i] = fmt::format("[{}] rank {}: {}", c.name, mesh.rank(), log.failures[i]);
    }
  }
  barrier(mesh, 999999, log);
}

}  // namespace dcomm::test
