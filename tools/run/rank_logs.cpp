#include "tools/run/rank_logs.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <dcomm/error.hpp>

namespace dcomm::run {
namespace {

void make_folders(const std::string& path) {
  for (std::size_t at = 1; at != std::string::npos;) {
    at = path.find('/', at + 1);
    std::string part = path.substr(0, at);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      throw SystemError(fmt::format("dcomm-run: cannot make the log folder {} (--log-dir)", part), errno);
    }
  }
}

int open_log(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw SystemError(fmt::format("dcomm-run: cannot open the log file {} (--log-dir)", path), errno);
  return fd;
}

}  // namespace

std::string rank_log_folder(const LaunchOptions& o, const RoundInfo& round, int local_rank) {
  const std::string& run_id = o.torch.rdzv_id.empty() ? round.run_id : o.torch.rdzv_id;
  return fmt::format("{}/{}/attempt_{}/{}", o.torch.log_dir, run_id, round.restart_count, local_rank);
}

void attach_rank_logs(const LaunchOptions& o, const RoundInfo& round, int local_rank, LineForwarder& out,
                      LineForwarder& err) {
  const int files = o.torch.log_dir.empty() ? 0 : o.torch.file_streams(local_rank);
  const int hidden = o.torch.hidden_streams(local_rank);
  std::string folder;
  if (files != 0) {
    folder = rank_log_folder(o, round, local_rank);
    make_folders(folder);
  }
  auto setup = [&](LineForwarder& f, int bit, const char* name) {
    int fd = (files & bit) != 0 ? open_log(fmt::format("{}/{}.log", folder, name)) : -1;
    if (fd >= 0 || (hidden & bit) != 0) f.copy_to(fd, (hidden & bit) == 0);
  };
  setup(out, kStdoutBit, "stdout");
  setup(err, kStderrBit, "stderr");
}

}  // namespace dcomm::run
