#pragma once
// A Store over a directory, for multi-process tests that must not depend on the TCP store: one file per key,
// written to a temporary name and renamed into place (readers never see half a value); add and compare_set hold an
// flock on a lock file. Every wait is bounded by the store's timeout.

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "common/deadline.hpp"

namespace dcomm::test {

class FileStore final : public Store {
 public:
  using Store::set;  // the string overload, which the override below would hide
  FileStore(std::filesystem::path dir, Duration timeout) : dir_(std::move(dir)), timeout_(timeout) {
    std::filesystem::create_directories(dir_);
  }

  void set(const std::string& key, const Bytes& value) override {
    const auto tmp = dir_ / (".tmp-" + std::to_string(getpid()) + "-" + file_of(key));
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(value.data()), static_cast<std::streamsize>(value.size()));
    }
    std::filesystem::rename(tmp, dir_ / file_of(key));
  }
  Bytes get(const std::string& key) override {
    wait({key}, timeout_);
    return read(key);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    Locked lock(dir_ / ".lock");
    int64_t v = exists(key) ? std::stoll(as_string(read(key))) : 0;
    v += delta;
    set(key, std::to_string(v));
    return v;
  }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    Locked lock(dir_ / ".lock");
    const bool present = exists(key);
    if ((!present && expected.empty()) || (present && read(key) == expected)) set(key, desired);
    return exists(key) ? read(key) : Bytes{};
  }
  bool check(const std::vector<std::string>& keys) override {
    for (const auto& k : keys) {
      if (!exists(k)) return false;
    }
    return true;
  }
  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    const Deadline deadline = Deadline::after(timeout == kDefaultTimeout ? timeout_ : timeout);
    Backoff backoff(std::chrono::milliseconds(5));
    while (!check(keys)) {
      if (deadline.expired()) {
        throw TimeoutError("FileStore " + dir_.string() + ": keys not set after " +
                           format_duration(deadline.elapsed()) + " (first: " + keys.front() + ")");
      }
      backoff.pause();
    }
  }
  bool delete_key(const std::string& key) override { return std::filesystem::remove(dir_ / file_of(key)); }
  int64_t num_keys() override {
    int64_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) n += e.path().filename().string()[0] != '.';
    return n;
  }
  Duration timeout() const override { return timeout_; }
  void set_timeout(Duration timeout) override { timeout_ = timeout; }
  std::string describe() const override { return "files in " + dir_.string(); }

 private:
  struct Locked {
    int fd;
    explicit Locked(const std::filesystem::path& p) : fd(::open(p.c_str(), O_CREAT | O_RDWR, 0600)) {
      flock(fd, LOCK_EX);
    }
    ~Locked() { ::close(fd); }
  };
  static std::string file_of(const std::string& key) {
    std::string f;
    for (char c : key) f += (c == '/' || c == '.') ? '_' : c;
    return f;
  }
  static std::string as_string(const Bytes& b) { return std::string(b.begin(), b.end()); }
  bool exists(const std::string& key) const { return std::filesystem::exists(dir_ / file_of(key)); }
  Bytes read(const std::string& key) const {
    std::ifstream in(dir_ / file_of(key), std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  std::filesystem::path dir_;
  Duration timeout_;
};

}  // namespace dcomm::test
