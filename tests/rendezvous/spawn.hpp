#pragma once
// Starting helper processes with posix_spawn (never fork: test processes have threads), with their own
// environment and their output in files, and reaping them within a deadline.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace dcomm::test {

struct Spawned {
  pid_t pid = -1;
  std::string out_path, err_path;
  int exit_code = -1;  // -1 until reaped; 128 + signal when killed

  std::string stdout_text, stderr_text;  // filled by capture()

  const std::string& out() const { return stdout_text; }
  const std::string& err() const { return stderr_text; }
  void capture() {
    stdout_text = slurp(out_path);
    stderr_text = slurp(err_path);
  }
  static std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
};

/// Starts program with this process's environment minus `drop`, plus `env`; stdout and stderr go to files
/// named after `tag` in dir.
inline Spawned spawn(const std::string& program, const std::map<std::string, std::string>& env,
                     const std::vector<std::string>& drop, const std::string& dir, const std::string& tag) {
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    std::string name = kv.substr(0, kv.find('='));
    bool dropped = env.count(name) != 0;
    for (const auto& d : drop) dropped = dropped || d == name;
    if (!dropped) vars.push_back(kv);
  }
  for (const auto& [k, v] : env) vars.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);

  Spawned s;
  s.out_path = dir + "/" + tag + ".out";
  s.err_path = dir + "/" + tag + ".err";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, s.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, s.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::string prog = program;
  char* argv[] = {prog.data(), nullptr};
  int rc = posix_spawn(&s.pid, program.c_str(), &fa, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("posix_spawn " + program + " failed: " + std::to_string(rc));
  return s;
}

/// Reaps every process, killing those still running at the deadline. Returns whether all ended by themselves.
inline bool reap_all(std::vector<Spawned>& procs, std::chrono::seconds within) {
  auto end = std::chrono::steady_clock::now() + within;
  bool all_ended = true;
  for (auto& p : procs) {
    for (;;) {
      int status = 0;
      pid_t r = ::waitpid(p.pid, &status, WNOHANG);
      if (r == p.pid) {
        p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() >= end) {
        all_ended = false;
        ::kill(p.pid, SIGKILL);
        ::waitpid(p.pid, &status, 0);
        p.exit_code = 128 + SIGKILL;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return all_ended;
}

}  // namespace dcomm::test
