// dcomm-run's store secret (issue 13): made per launch on one node, the user's when given (variable or file),
// required across nodes; and the secret file's checks.

#include <catch2/catch.hpp>

#include <dcomm/error.hpp>

#include "rendezvous/secret.hpp"
#include "tools/run/store_secret.hpp"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <regex>

using namespace dcomm::run;

namespace {

void clear_store_env() {
  for (const char* v : {"DCOMM_STORE_SECRET", "DCOMM_STORE_SECRET_FILE", "DCOMM_STORE_INSECURE"}) ::unsetenv(v);
}

// Clears the store's variables before and after one test (the test process sets none of them otherwise).
struct CleanStoreEnv {
  CleanStoreEnv() { clear_store_env(); }
  ~CleanStoreEnv() { clear_store_env(); }
};

}  // namespace

TEST_CASE("dcomm-run's store secret: fresh per launch on one node, the user's across nodes") {
  CleanStoreEnv clean;
  LaunchOptions one;
  std::string a = launch_secret(one), b = launch_secret(one);
  CHECK(std::regex_match(a, std::regex("[0-9a-f]{64}")));
  CHECK(a != b);

  LaunchOptions two;
  two.nnodes = 2;
  two.master_port = 29500;
  try {
    launch_secret(two);
    FAIL("several nodes without a secret were accepted");
  } catch (const UsageError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("--nnodes 2") && Catch::Contains("DCOMM_STORE_SECRET_FILE"));
  }
  ::setenv("DCOMM_STORE_SECRET", "users-secret", 1);
  CHECK(launch_secret(two) == "users-secret");
  CHECK(launch_secret(one) == "users-secret");
  ::unsetenv("DCOMM_STORE_SECRET");
  ::setenv("DCOMM_STORE_INSECURE", "1", 1);
  CHECK(launch_secret(two).empty());
  ::unsetenv("DCOMM_STORE_INSECURE");

  // The server's and the launchers' options carry the job; launchers leave the world size to the rendezvous.
  auto server = store_options(two, "s", "00ff");
  CHECK(server.run_id == "DCOMM_RUN_ID=00ff");
  CHECK(server.world_size == 2);
  CHECK(launcher_client_options(two, "s", "").world_size == 0);
}

TEST_CASE("the store's secret file: read, one newline dropped, refused when others can read it") {
  CleanStoreEnv clean;
  char path[] = "/tmp/dcomm-secret-XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << "from-a-file\n";
  ::chmod(path, 0600);
  ::setenv("DCOMM_STORE_SECRET_FILE", path, 1);
  CHECK(dcomm::rdzv::resolve_secret("") == "from-a-file");
  CHECK(dcomm::rdzv::resolve_secret("given") == "given");
  ::chmod(path, 0644);
  try {
    dcomm::rdzv::resolve_secret("");
    FAIL("a secret file readable by others was accepted");
  } catch (const dcomm::InvalidUsageError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains(path) && Catch::Contains("chmod 600"));
  }
  ::unlink(path);
  CHECK_THROWS_AS(dcomm::rdzv::resolve_secret(""), dcomm::SystemError);
}
