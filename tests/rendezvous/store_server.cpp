// A TCP store server in a process of its own, so that a test can attack it and read the server's own peak memory
// (VmHWM) from /proc. Serves on 127.0.0.1 with a free port and the secret in DCOMM_STORE_SECRET; prints the port
// on one line; serves until killed. Exit code 3 when it cannot start (the reason on stderr).

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>

#include <cstdio>
#include <thread>

int main() {
  try {
    auto server = dcomm::start_tcp_store_server("127.0.0.1", 0);
    std::printf("%u\n", static_cast<unsigned>(server->port()));
    std::fflush(stdout);
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store_server: %s\n", e.what());
    return 3;
  }
}
