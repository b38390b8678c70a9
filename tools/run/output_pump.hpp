#pragma once
// Forwards one rank's stdout or stderr to the launcher's, line by line, with a "[rank R]: " prefix. Lines are
// forwarded whole: a partial line waits for its end (or for EOF, or until it grows past kMaxLineBytes), so lines
// of different ranks never mix. The last few lines are kept for the failure summary.

#include <cstddef>
#include <string>
#include <vector>

#include "tools/run/stderr_tail.hpp"

namespace dcomm::run {

class LineForwarder {
 public:
  /// A line this long is forwarded even without its newline, so one endless line cannot grow without bound.
  static constexpr std::size_t kMaxLineBytes = 64 * 1024;

  /// Takes ownership of src_fd (non-blocking). dest_fd is the launcher's stdout or stderr.
  LineForwarder(int src_fd, int dest_fd, std::string prefix, std::size_t tail_lines);
  ~LineForwarder();
  LineForwarder(const LineForwarder&) = delete;
  LineForwarder& operator=(const LineForwarder&) = delete;

  /// Also writes every line, without the prefix, to log_fd (taken over; -1: none), and to the console only when
  /// `console` (torchrun's --tee, --redirects and --local-ranks-filter).
  void copy_to(int log_fd, bool console);

  /// Shows what follows a partial line's '\r' as the launcher's status line (status_line.hpp); for a terminal.
  void show_status_lines();

  int fd() const { return src_fd_; }
  bool is_open() const { return src_fd_ >= 0; }
  /// Reads what is available and forwards complete lines; at EOF forwards the partial line and closes.
  /// Returns whether anything was read.
  bool pump();
  /// Forwards a pending partial line and closes the pipe (for a rank whose pipe a grandchild keeps open).
  void close();
  /// The last lines seen (without prefix), oldest first; a crash backtrace is summarised (stderr_tail.hpp).
  std::vector<std::string> tail() const { return tail_.lines(); }

 private:
  enum class ReadResult { kData, kNothing, kEnd };
  ReadResult read_some();
  void finish();
  void emit(std::string_view line, std::string* out);
  void write_out(const std::string& out);

  int src_fd_;
  int dest_fd_;
  std::string prefix_;
  std::string partial_;
  StderrTail tail_;
  int log_fd_ = -1;
  bool console_ = true;
  std::string log_out_;
  bool status_lines_ = false;
};

/// Writes all of data to fd, retrying short writes; gives up quietly if the reader has gone (EPIPE).
void write_all(int fd, std::string_view data);

}  // namespace dcomm::run
