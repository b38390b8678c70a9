// The world's root-cause record: the first writer wins, and waits that watch it fail at once naming the rank.

#include <catch2/catch.hpp>

#include <thread>

#include <dcomm/error.hpp>

#include "rendezvous/failure_record.hpp"

using namespace dcomm;
using namespace dcomm::rdzv;

TEST_CASE("the first failure recorded holds; later ones read it back", "[failure]") {
  auto store = make_memory_store(std::chrono::seconds(5));
  CHECK_FALSE(read_failure(*store).has_value());
  FailureRecord dead{3, 4242, "vm", "was killed by signal 9 SIGKILL (Killed)", "dcomm-run", false};
  auto held = publish_failure(*store, dead);
  REQUIRE(held.has_value());
  CHECK((held->rank == 3 && held->pid == 4242 && held->reporter == "dcomm-run"));
  FailureRecord later{0, 1, "vm", "exited", "rank 1", false};
  held = publish_failure(*store, later);
  REQUIRE(held.has_value());
  CHECK(held->rank == 3);  // the first writer wins
  CHECK(read_failure(*store)->describe() ==
        "rank 3 (pid 4242 on host vm) was killed by signal 9 SIGKILL (Killed) (seen by dcomm-run)");
  CHECK_FALSE(decode_failure("not a record").has_value());
}

TEST_CASE("a wait that watches the record fails at once naming the failed rank", "[failure]") {
  auto store = make_memory_store(std::chrono::seconds(5));
  Deadline deadline = Deadline::after(std::chrono::seconds(20));
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    publish_failure(*store, FailureRecord{2, 99, "vm", "exited with code 1", "dcomm-run", false});
  });
  try {
    wait_watching_failures(*store, {"never/set"}, deadline, FailureWatch{store.get(), 0}, "mesh setup rank 0/4");
    FAIL("the wait returned");
  } catch (const RemoteError& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("mesh setup rank 0/4: rank 2 failed first: rank 2 (pid 99 on host vm) exited with code 1") == 0);
  }
  later.join();
  CHECK(deadline.elapsed() < std::chrono::seconds(5));

  // The waiting rank's own record does not fail its wait; the deadline does, with the store's TimeoutError.
  auto other = make_memory_store(std::chrono::seconds(5));
  publish_failure(*other, FailureRecord{0, 1, "vm", "exited", "rank 1", false});
  CHECK_THROWS_AS(wait_watching_failures(*other, {"never/set"}, Deadline::after(std::chrono::milliseconds(300)),
                                         FailureWatch{other.get(), 0}, "w"),
                  TimeoutError);
}
