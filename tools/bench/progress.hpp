#pragma once
// Progress on long sweeps: rank 0's table already prints a line per size as it completes; when stderr is a
// terminal (directly, or through dcomm-run, which says so with DCOMM_RUN_TTY=1), a bar under it shows how far the
// sweep has got.

#include <cstddef>
#include <string>

namespace dcomm::bench {

class Progress {
 public:
  /// `enabled`: this rank reports (rank 0); the bar also needs a terminal to see stderr.
  Progress(std::size_t total, bool enabled);
  /// Erases the bar so that a table line can be printed in its place.
  void clear();
  /// One more size is done; redraws the bar.
  void step(const std::string& what);
  void finish();

 private:
  std::size_t total_, done_ = 0;
  bool bar_;
  bool drawn_ = false;
};

}  // namespace dcomm::bench
