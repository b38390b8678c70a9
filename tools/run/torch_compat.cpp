#include "tools/run/torch_compat.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <tuple>

namespace dcomm::run {
namespace {

// torchrun runs Python programs with its own interpreter, unbuffered; dcomm-run uses python3 from PATH.
constexpr const char* kPython = "python3";

// --rdzv-conf keys: those that set a dcomm-run bound, and those torchrun's backends read that have no meaning
// for dcomm-run's store (accepted so that a torchrun command line works, with no effect).
constexpr const char* kConfTimeoutKeys[] = {"join_timeout", "timeout", "last_call_timeout"};
constexpr const char* kConfIgnoredKeys[] = {"close_timeout", "read_timeout",           "is_host",   "store_type", "use_libuv",
                                            "keep_alive_interval", "keep_alive_max_attempt", "heartbeat", "local_addr"};

bool parse_int(const std::string& text, int* out) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  *out = std::stoi(text);
  return true;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t at; (at = text.find(sep, start)) != std::string::npos; start = at + 1) {
    out.push_back(text.substr(start, at - start));
  }
  out.push_back(text.substr(start));
  return out;
}

int usable_cpus() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// GPUs this launch may use: CUDA_VISIBLE_DEVICES when set, else the NVIDIA device files (no CUDA needed here).
int visible_gpus() {
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    int n = 0;
    for (const auto& id : split(v, ',')) {
      if (id.empty() || id.front() == '-') break;  // CUDA stops at the first invalid entry
      ++n;
    }
    return n;
  }
  int n = 0;
  if (DIR* d = ::opendir("/dev")) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      int ignored = 0;
      if (name.rfind("nvidia", 0) == 0 && parse_int(name.substr(6), &ignored)) ++n;
    }
    ::closedir(d);
  }
  return n;
}

void apply_rdzv_conf(const std::string& conf, LaunchOptions* o) {
  if (conf.empty()) return;
  for (const auto& item : split(conf, ',')) {
    auto eq = item.find('=');
    std::string key = item.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (eq == std::string::npos || key.empty()) {
      throw UsageError(fmt::format("--rdzv-conf '{}': '{}' is not key=value", conf, item));
    }
    if (std::find(std::begin(kConfTimeoutKeys), std::end(kConfTimeoutKeys), key) != std::end(kConfTimeoutKeys)) {
      int seconds = 0;
      if (!parse_int(value, &seconds) || seconds <= 0) {
        throw UsageError(fmt::format("--rdzv-conf {}={}: expected a positive number of seconds", key, value));
      }
      (key == "last_call_timeout" ? o->last_call_timeout : o->rdzv_timeout) = std::chrono::seconds(seconds);
    } else if (std::find(std::begin(kConfIgnoredKeys), std::end(kConfIgnoredKeys), key) == std::end(kConfIgnoredKeys)) {
      std::string known;
      for (const char* k : kConfTimeoutKeys) known += fmt::format("{}{}", known.empty() ? "" : ", ", k);
      for (const char* k : kConfIgnoredKeys) known += fmt::format(", {}", k);
      throw UsageError(fmt::format("--rdzv-conf: unknown key '{}' (known: {})", key, known));
    }
  }
}

std::set<int> parse_rank_list(const std::string& text) {
  std::set<int> out;
  for (const auto& item : split(text, ',')) {
    int r = 0;
    if (!parse_int(item, &r)) {
      throw UsageError(fmt::format("--local-ranks-filter '{}': '{}' is not a local rank (e.g. 0,2)", text, item));
    }
    out.insert(r);
  }
  return out;
}

// torchrun's program: `python3 -u script.py args`, `python3 -u -m module args`, or the program itself.
void rewrite_command(const TorchFlags& f, std::vector<std::string>* command) {
  if (command->empty()) return;
  const std::string& first = command->front();
  const int modes = int{f.module} + int{f.run_path} + int{f.no_python};
  if (modes > 1) throw UsageError("--module (-m), --run-path and --no-python exclude each other");
  if (f.no_python) return;
  if (f.module) {
    command->insert(command->begin(), {kPython, "-u", "-m"});
  } else if (f.run_path || (first.size() > 3 && first.ends_with(".py"))) {
    command->insert(command->begin(), {kPython, "-u"});
  }
}

}  // namespace

std::pair<int, int> parse_nnodes(const std::string& text) {
  auto colon = text.find(':');
  int min = 0, max = 0;
  if (colon == std::string::npos) {
    if (!parse_int(text, &min)) throw UsageError(fmt::format("--nnodes '{}' is not a number of nodes", text));
    return {min, min};
  }
  if (!parse_int(text.substr(0, colon), &min) || !parse_int(text.substr(colon + 1), &max)) {
    throw UsageError(fmt::format("--nnodes '{}' is not N or MIN:MAX (e.g. 2:4)", text));
  }
  if (min < 1 || min > max) {
    throw UsageError(fmt::format("--nnodes {}: MIN:MAX needs 1 <= MIN <= MAX (got MIN {}, MAX {})", text, min, max));
  }
  return {min, max};
}

int parse_nproc_per_node(const std::string& text) {
  if (text.empty()) throw UsageError("--nproc-per-node is required (a count, or auto, cpu, gpu)");
  int n = 0;
  if (parse_int(text, &n)) return n;
  if (text == "cpu") return usable_cpus();
  if (text == "gpu" || text == "auto") {
    int gpus = visible_gpus();
    if (gpus > 0) return gpus;
    if (text == "auto") return usable_cpus();
    throw UsageError(
        "--nproc-per-node gpu: no GPU is visible (no /dev/nvidiaN, or CUDA_VISIBLE_DEVICES is "
        "empty); give a count, or auto or cpu");
  }
  if (!text.empty() && text.front() == '-' && parse_int(text.substr(1), &n)) {
    throw UsageError(fmt::format("--nproc-per-node must be at least 1 (got {})", text));
  }
  throw UsageError(fmt::format("--nproc-per-node '{}' is not a count, auto, cpu or gpu", text));
}

StreamSpec parse_streams(const char* flag, const std::string& text) {
  StreamSpec s;
  auto value = [&](const std::string& v) {
    int bits = 0;
    if (!parse_int(v, &bits) || bits > (kStdoutBit | kStderrBit)) {
      throw UsageError(
          fmt::format("{} '{}': expected 0 (none), 1 (stdout), 2 (stderr) or 3 (both), or per local "
                      "rank as 0:1,1:2",
                      flag, text));
    }
    return bits;
  };
  if (text.find(':') == std::string::npos) {
    s.all = value(text);
    return s;
  }
  s.uniform = false;
  for (const auto& item : split(text, ',')) {
    auto colon = item.find(':');
    int rank = 0;
    if (colon == std::string::npos || !parse_int(item.substr(0, colon), &rank)) {
      throw UsageError(fmt::format("{} '{}': '{}' is not local_rank:streams", flag, text, item));
    }
    s.per_rank[rank] = value(item.substr(colon + 1));
  }
  return s;
}

void add_torch_flags(CLI::App& app, TorchFlags* f) {
  app.add_option("--nproc-per-node,--nproc_per_node", f->nproc_per_node,
                 "ranks to start on this node: a count, or auto, cpu, gpu (as torchrun); required");
  app.add_option("--nnodes", f->nnodes, "nodes in the world: N, or MIN:MAX (elastic: rounds of MIN to MAX nodes)");
  app.add_option("--rdzv-backend,--rdzv_backend", f->rdzv_backend,
                 "c10d or static: node 0's launcher hosts the store at --rdzv-endpoint (as torchrun)");
  app.add_option("--rdzv-id,--rdzv_id", f->rdzv_id, "the job's id, exported as TORCHELASTIC_RUN_ID");
  app.add_option("--rdzv-conf,--rdzv_conf", f->rdzv_conf,
                 "key=value,...: join_timeout (or timeout) sets --rdzv-timeout, last_call_timeout (elastic); torchrun's other keys are accepted");
  app.add_option("--monitor-interval,--monitor_interval", f->monitor_interval_s,
                 "elastic: seconds between looks for an agent waiting to join (rank exits are seen at once)");
  app.add_option("--redirects,-r", f->redirects, "streams to write to the log files only: 0-3 or 0:1,1:2 (torchrun)");
  app.add_option("--tee,-t", f->tee, "streams to write to the log files and the console: 0-3 or 0:1,1:2 (torchrun)");
  app.add_option("--log-dir,--log_dir", f->log_dir,
                 "write each rank's stdout.log/stderr.log under DIR/<run id>/attempt_<restart>/<local rank>/");
  app.add_option("--local-ranks-filter,--local_ranks_filter", f->local_ranks_filter,
                 "only these local ranks' output reaches the console, e.g. 0 or 0,3");
  app.add_option("--role", f->role, "the role's name, exported as ROLE_NAME (default 'default')");
  app.add_flag("-m,--module", f->module, "run the program as python3 -u -m MODULE (torchrun's -m)");
  app.add_flag("--run-path,--run_path", f->run_path, "run the program as python3 -u SCRIPT (torchrun's --run-path)");
  app.add_flag("--no-python,--no_python", f->no_python, "run the program itself, also a .py file");
}

void apply_torch_flags(const TorchFlags& f, LaunchOptions* o) {
  std::tie(o->nnodes_min, o->nnodes) = parse_nnodes(f.nnodes);
  o->nproc_per_node = parse_nproc_per_node(f.nproc_per_node);
  if (!f.rdzv_backend.empty() && f.rdzv_backend != "c10d" && f.rdzv_backend != "static") {
    throw UsageError(
        fmt::format("--rdzv-backend {} is not supported: dcomm-run accepts c10d and static (both mean "
                    "node 0's dcomm-run hosts the store at --rdzv-endpoint or --master-addr/--master-port)",
                    f.rdzv_backend));
  }
  if (!std::isfinite(f.monitor_interval_s) || f.monitor_interval_s <= 0) {
    throw UsageError(
        fmt::format("--monitor-interval must be a positive number of seconds (got {})", f.monitor_interval_s));
  }
  o->monitor_interval = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(f.monitor_interval_s));
  if (f.role.empty()) throw UsageError("--role must not be empty");
  apply_rdzv_conf(f.rdzv_conf, o);
  TorchSettings& t = o->torch;
  t.role = f.role;
  t.rdzv_id = f.rdzv_id;
  t.rdzv_backend = f.rdzv_backend;
  t.log_dir = f.log_dir;
  if (!f.redirects.empty()) t.redirects = parse_streams("--redirects", f.redirects);
  if (!f.tee.empty()) t.tee = parse_streams("--tee", f.tee);
  if (!f.local_ranks_filter.empty()) t.console_ranks = parse_rank_list(f.local_ranks_filter);
  rewrite_command(f, &o->command);
}

std::string prepare_log_dir(LaunchOptions* o) {
  TorchSettings& t = o->torch;
  if (!t.log_dir.empty() || (!t.redirects.any() && !t.tee.any())) return "";
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = fmt::format("{}/dcomm-run_XXXXXX", tmp != nullptr && *tmp != '\0' ? tmp : "/tmp");
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    throw UsageError(
        fmt::format("--redirects/--tee without --log-dir: cannot make a folder {}: {}", pattern, std::strerror(errno)));
  }
  t.log_dir = buf.data();
  return fmt::format("dcomm-run: --redirects/--tee without --log-dir: the ranks' log files go to {}", t.log_dir);
}

}  // namespace dcomm::run
