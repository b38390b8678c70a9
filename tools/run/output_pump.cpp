#include "tools/run/output_pump.hpp"

#include "tools/run/status_line.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace dcomm::run {
namespace {

constexpr std::size_t kReadChunk = 64 * 1024;
// A launcher whose stdout is a non-blocking pipe nobody drains must not hang forever on one line.
constexpr int kWriteRetryMs = 100;
constexpr int kMaxWriteRetries = 600;

}  // namespace

void write_all(int fd, std::string_view data) {
  int retries = 0;
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && ++retries <= kMaxWriteRetries) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, kWriteRetryMs);
      continue;
    }
    return;  // EPIPE or a persistent error: the output has nowhere to go.
  }
}

LineForwarder::LineForwarder(int src_fd, int dest_fd, std::string prefix, std::size_t tail_lines)
    : src_fd_(src_fd), dest_fd_(dest_fd), prefix_(std::move(prefix)), tail_(tail_lines) {}

LineForwarder::~LineForwarder() {
  close();
  if (log_fd_ >= 0) ::close(log_fd_);
}

void LineForwarder::copy_to(int log_fd, bool console) {
  if (log_fd_ >= 0) ::close(log_fd_);
  log_fd_ = log_fd;
  console_ = console;
}

void LineForwarder::show_status_lines() { status_lines_ = true; }

void LineForwarder::emit(std::string_view line, std::string* out) {
  // A line that ends a redrawn one (a bar's last state, then '\n'): what a terminal would show of it.
  std::string cleaned;
  if (status_lines_ && line.find('\r') != std::string_view::npos) {
    cleaned = visible_after_carriage_return(line);
    if (cleaned.empty()) return;
    line = cleaned;
  }
  if (console_) {
    out->append(prefix_);
    out->append(line);
    out->push_back('\n');
  }
  if (log_fd_ >= 0) {
    log_out_.append(line);
    log_out_.push_back('\n');
  }
  tail_.add(line);
}

LineForwarder::ReadResult LineForwarder::read_some() {
  char buf[kReadChunk];
  ssize_t n = ::read(src_fd_, buf, sizeof(buf));
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return ReadResult::kNothing;
  if (n <= 0) return ReadResult::kEnd;  // EOF, or an error that ends this stream all the same
  partial_.append(buf, static_cast<std::size_t>(n));
  std::string out;
  std::size_t start = 0;
  for (std::size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
    emit(std::string_view(partial_).substr(start, nl - start), &out);
  }
  partial_.erase(0, start);
  while (partial_.size() >= kMaxLineBytes) {
    emit(std::string_view(partial_).substr(0, kMaxLineBytes), &out);
    partial_.erase(0, kMaxLineBytes);
  }
  if (status_lines_ && partial_.find('\r') != std::string::npos) {
    // A redrawn line (a progress bar): the terminal shows what follows the last '\r'; the rest is overwritten.
    std::string visible = visible_after_carriage_return(partial_);
    partial_.clear();
    write_out(out);
    StatusLine::show(dest_fd_, visible.empty() ? visible : prefix_ + visible);
    return ReadResult::kData;
  }
  write_out(out);
  return ReadResult::kData;
}

void LineForwarder::write_out(const std::string& out) {
  if (!out.empty()) {
    StatusLine::before_write();
    write_all(dest_fd_, out);
    StatusLine::after_write();
  }
  if (!log_out_.empty()) {
    write_all(log_fd_, log_out_);
    log_out_.clear();
  }
}

bool LineForwarder::pump() {
  if (src_fd_ < 0) return false;
  ReadResult r = read_some();
  if (r == ReadResult::kEnd) finish();
  return r == ReadResult::kData;
}

void LineForwarder::close() {
  if (src_fd_ < 0) return;
  // Whatever is still in the pipe belongs to the rank's last words; take it without waiting.
  while (read_some() == ReadResult::kData) {
  }
  finish();
}

void LineForwarder::finish() {
  if (!partial_.empty()) {
    std::string out;
    emit(partial_, &out);
    partial_.clear();
    write_out(out);
  }
  ::close(src_fd_);
  src_fd_ = -1;
}

}  // namespace dcomm::run
