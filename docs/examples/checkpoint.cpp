#include "checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "bytes.hpp"

namespace examples {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'D', 'C', 'O', 'M', 'M', 'C', 'K', '1'};
constexpr const char* kPrefix = "step-";
constexpr const char* kSuffix = ".ckpt";

std::string errno_text(const std::string& what, const std::string& path) {
  return what + " '" + path + "' failed: " + std::strerror(errno);
}

void write_all(int fd, const std::vector<uint8_t>& bytes, const std::string& path) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(errno_text("write", path));
    done += static_cast<std::size_t>(n);
  }
}

void fsync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) throw std::runtime_error(errno_text("open", path));
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  errno = saved;
  if (rc != 0) throw std::runtime_error(errno_text("fsync", path));
}

// Snapshots in dir with their steps, newest first.
std::vector<std::pair<int64_t, fs::path>> list_snapshots(const std::string& dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0 || name.size() <= std::strlen(kPrefix) + std::strlen(kSuffix) ||
        name.substr(name.size() - std::strlen(kSuffix)) != kSuffix) {
      continue;
    }
    const std::string digits =
        name.substr(std::strlen(kPrefix), name.size() - std::strlen(kPrefix) - std::strlen(kSuffix));
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    found.emplace_back(std::stoll(digits), e.path());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return found;
}

}  // namespace

std::vector<uint8_t> encode_snapshot(const Snapshot& s) {
  ByteWriter w;
  w.append(kMagic, sizeof(kMagic));
  w.put<int64_t>(s.step);
  w.put(s.rng);
  w.put_array(s.widths);
  w.put_array(std::vector<char>(s.optimizer.begin(), s.optimizer.end()));
  w.put_array(s.params);
  w.put_array(s.optimizer_state);
  const uint64_t sum = fnv1a64(w.bytes().data(), w.bytes().size());
  w.put(sum);
  return std::move(w.bytes());
}

Snapshot decode_snapshot(const std::vector<uint8_t>& bytes, const std::string& origin) {
  if (bytes.size() < sizeof(kMagic) + sizeof(uint64_t) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    throw std::runtime_error("snapshot " + origin + ": not a dcomm example checkpoint (bad magic or too short)");
  }
  const std::size_t body = bytes.size() - sizeof(uint64_t);
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + body, sizeof(stored));
  if (stored != fnv1a64(bytes.data(), body)) {
    throw std::runtime_error("snapshot " + origin + ": checksum mismatch (the file is corrupt or truncated)");
  }
  try {
    ByteReader r(bytes.data() + sizeof(kMagic), body - sizeof(kMagic));
    Snapshot s;
    s.step = r.get<int64_t>();
    s.rng = r.get<Rng::State>();
    s.widths = r.get_array<int32_t>();
    const std::vector<char> name = r.get_array<char>();
    s.optimizer.assign(name.begin(), name.end());
    s.params = r.get_array<float>();
    s.optimizer_state = r.get_array<uint8_t>();
    if (r.remaining() != 0) throw std::runtime_error(std::to_string(r.remaining()) + " unexpected trailing bytes");
    return s;
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("snapshot " + origin + ": " + e.what());
  }
}

std::string write_snapshot_file(const std::string& dir, int64_t step, const std::vector<uint8_t>& bytes, int keep) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("create checkpoint directory '" + dir + "' failed: " + ec.message());
  char name[64];
  std::snprintf(name, sizeof(name), "%s%010lld%s", kPrefix, static_cast<long long>(step), kSuffix);
  const std::string final_path = (fs::path(dir) / name).string();
  char temp_name[96];  // hidden, and unique per writer, so a crashed writer's leftovers never clash
  std::snprintf(temp_name, sizeof(temp_name), ".%s.tmp.%d", name, static_cast<int>(::getpid()));
  const std::string temp_path = (fs::path(dir) / temp_name).string();

  const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(errno_text("create", temp_path));
  try {
    write_all(fd, bytes, temp_path);
    if (::fsync(fd) != 0) throw std::runtime_error(errno_text("fsync", temp_path));
  } catch (...) {
    ::close(fd);
    ::unlink(temp_path.c_str());
    throw;
  }
  if (::close(fd) != 0) throw std::runtime_error(errno_text("close", temp_path));
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    const std::string msg = errno_text("rename to '" + final_path + "' of", temp_path);
    ::unlink(temp_path.c_str());
    throw std::runtime_error(msg);
  }
  // The rename is durable only once the directory entry is.
  fsync_path(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  const auto all = list_snapshots(dir);
  for (std::size_t i = static_cast<std::size_t>(std::max(keep, 1)); i < all.size(); ++i) fs::remove(all[i].second, ec);
  return final_path;
}

std::optional<SnapshotFile> find_latest_snapshot(const std::string& dir) {
  for (const auto& [step, path] : list_snapshots(dir)) {
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      (void)decode_snapshot(bytes, path.string());
      return SnapshotFile{path.string(), std::move(bytes)};
    } catch (const std::runtime_error& e) {
      std::fprintf(stderr, "skipping checkpoint: %s\n", e.what());
    }
  }
  return std::nullopt;
}

}  // namespace examples
