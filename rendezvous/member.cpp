#include "rendezvous/member.hpp"

#include <dcomm/error.hpp>

#include <fmt/format.h>
#include <unistd.h>

#include <random>
#include <sstream>

namespace dcomm::rdzv {
namespace {

constexpr const char* kRecordTag = "dcomm-member-v1";

std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n') c = ' ';
  }
  return s;
}

uint64_t fresh_nonce() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(::getpid());
}

}  // namespace

std::string Member::describe() const { return fmt::format("pid {} on host {}", pid, hostname); }

Member make_member(const Identity& declared, const std::string& error) {
  Member m;
  m.pid = static_cast<int>(::getpid());
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  m.hostname = host;
  m.nonce = fresh_nonce();
  m.declared = declared;
  m.error = error;
  return m;
}

std::string encode_member(const Member& m) {
  const Identity& d = m.declared;
  // One field per line, in a fixed order; the free-text fields come last and are kept to one line each.
  return fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}", kRecordTag, m.pid, m.nonce, d.rank,
                     d.world_size, d.local_rank, d.local_world_size, d.node_rank, d.node_count, one_line(d.source),
                     one_line(m.hostname), one_line(d.host_id), one_line(m.error));
}

Member decode_member(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::vector<std::string> f;
  for (std::string line; std::getline(in, line);) f.push_back(line);
  if (!text.empty() && text.back() == '\n') f.push_back("");  // an empty error field
  auto bad = [&](const std::string& why) {
    return Error(ErrorCode::kRemoteError,
                 fmt::format("rendezvous: the record at '{}' is not a dcomm member record ({}); another program or "
                             "dcomm version may share this store - use a distinct DCOMM_RUN_ID or port",
                             key, why));
  };
  if (f.size() != 13 || f[0] != kRecordTag) throw bad(fmt::format("{} fields", f.size()));
  Member m;
  try {
    m.pid = std::stoi(f[1]);
    m.nonce = std::stoull(f[2]);
    int* ints[] = {&m.declared.rank,           &m.declared.world_size, &m.declared.local_rank,
                   &m.declared.local_world_size, &m.declared.node_rank, &m.declared.node_count};
    for (int i = 0; i < 6; ++i) *ints[i] = std::stoi(f[3 + i]);
  } catch (const std::exception& e) {
    throw bad(e.what());
  }
  m.declared.source = f[9];
  m.hostname = f[10];
  m.declared.host_id = f[11];
  m.error = f[12];
  return m;
}

}  // namespace dcomm::rdzv
