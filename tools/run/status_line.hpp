#pragma once
// Progress bars through dcomm-run. A rank that redraws one line with '\r' (dcomm-bench's bar, tqdm) never ends
// that line, so the line forwarder would hold it until the rank exits. When the launcher's stderr is a terminal,
// the text after a rank's last '\r' becomes the launcher's status line instead: drawn (prefixed) at the bottom of
// the terminal, taken away before any other line is written and drawn again after it. dcomm-run then exports
// DCOMM_RUN_TTY=1 so that ranks know a bar will be seen (dcomm-bench draws one on rank 0).

#include <string>
#include <string_view>

namespace dcomm::run {

class StatusLine {
 public:
  /// Whether the launcher's stderr is a terminal (decided once).
  static bool enabled();
  /// Shows `text` (already prefixed) as the status line on `fd`; empty text takes it away.
  static void show(int fd, const std::string& text);
  /// Around a write of whole lines to the terminal: take the status line away, then draw it again.
  static void before_write();
  static void after_write();
};

/// The part of a partial line a terminal would show: what follows its last '\r', without "ESC[K" (erase line).
std::string visible_after_carriage_return(std::string_view partial);

}  // namespace dcomm::run
