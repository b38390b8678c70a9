#include "rendezvous/secret.hpp"

#include <dcomm/error.hpp>

#include "common/env.hpp"
#include "rendezvous/hello.hpp"

#include <fmt/format.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <sstream>

namespace dcomm::rdzv {
namespace {

std::string read_secret_file(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    throw SystemError(fmt::format("DCOMM_STORE_SECRET_FILE={}: cannot read the store's secret", path), errno);
  }
  // Like ssh with its keys: a secret others can read is no secret.
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    throw InvalidUsageError(fmt::format("DCOMM_STORE_SECRET_FILE={}: the file is accessible to group or others (mode "
                                        "{:04o}); `chmod 600 {}`",
                                        path, st.st_mode & 07777, path));
  }
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  if (!s.empty() && s.back() == '\n') s.pop_back();
  if (!f || s.empty() || s.size() > kMaxSecretBytes) {
    throw InvalidUsageError(fmt::format("DCOMM_STORE_SECRET_FILE={}: the secret must be 1 to {} bytes (read {})", path,
                                        kMaxSecretBytes, s.size()));
  }
  return s;
}

}  // namespace

std::string resolve_secret(const std::string& given) {
  if (!given.empty()) return given;
  if (auto v = env::get("DCOMM_STORE_SECRET"); v && !v->empty()) return *v;
  if (auto path = env::get("DCOMM_STORE_SECRET_FILE"); path && !path->empty()) return read_secret_file(*path);
  return "";
}

bool insecure_chosen() { return env::get_bool("DCOMM_STORE_INSECURE", false); }

std::string generate_secret() {
  unsigned char raw[32];
  std::size_t got = 0;
  while (got < sizeof raw) {
    ssize_t r = ::getrandom(raw + got, sizeof raw - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw SystemError("getrandom for the store's secret", errno);
    got += static_cast<std::size_t>(r);
  }
  std::string hex;
  for (unsigned char c : raw) hex += fmt::format("{:02x}", c);
  return hex;
}

bool secrets_equal(const std::string& a, const std::string& b) noexcept {
  // Walk the longer length in full and fold every difference into one accumulator: no early exit.
  std::size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (std::size_t i = 0; i < n; ++i) {
    unsigned ca = i < a.size() ? static_cast<unsigned char>(a[i]) : 0u;
    unsigned cb = i < b.size() ? static_cast<unsigned char>(b[i]) : 0u;
    diff |= ca ^ cb;
  }
  return diff == 0;
}

}  // namespace dcomm::rdzv
