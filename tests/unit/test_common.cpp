#include <catch2/catch.hpp>

#include <dcomm/dcomm.hpp>

#include "common/deadline.hpp"
#include "common/env.hpp"
#include "common/log.hpp"

#include <cstdlib>
#include <thread>

using namespace dcomm;

TEST_CASE("dtype sizes, names and parsing round-trip", "[common]") {
  for (DType t : kAllDTypes) {
    DType back{};
    REQUIRE(parse_dtype(to_string(t), &back));
    CHECK(back == t);
    CHECK(dtype_size(t) >= 1);
  }
  CHECK(dtype_size(DType::kBFloat16) == 2);
  CHECK(dtype_size(DType::kUInt64) == 8);
  DType t{};
  CHECK_FALSE(parse_dtype("float128", &t));
}

TEST_CASE("bitwise ops fit integers only", "[common]") {
  CHECK(op_fits_dtype(ReduceOp::kBXor, DType::kInt32));
  CHECK_FALSE(op_fits_dtype(ReduceOp::kBAnd, DType::kFloat32));
  CHECK(op_fits_dtype(ReduceOp::kMax, DType::kBFloat16));
}

TEST_CASE("deadlines expire and report their timeout", "[common]") {
  Deadline d = Deadline::after(std::chrono::milliseconds(20));
  CHECK_FALSE(d.expired());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(d.expired());
  CHECK(d.elapsed() >= std::chrono::milliseconds(20));
  CHECK_FALSE(Deadline::never().expired());
  CHECK(format_duration(std::chrono::milliseconds(1500)) == "1.5 s");
  CHECK(format_bytes(4u << 20) == "4.0 MiB");
}

TEST_CASE("environment integers are validated, naming the variable", "[common]") {
  setenv("DCOMM_TEST_INT", "12x", 1);
  try {
    env::get_int("DCOMM_TEST_INT");
    FAIL("expected an error");
  } catch (const InvalidUsageError& e) {
    CHECK(std::string(e.what()).find("DCOMM_TEST_INT='12x'") != std::string::npos);
  }
  setenv("DCOMM_TEST_INT", "-7", 1);
  CHECK(env::get_int("DCOMM_TEST_INT", 0) == -7);
}

TEST_CASE("log: DCOMM_LOG_LEVEL in any case and as a number", "[log]") {
  using dcomm::log::Level;
  using dcomm::log::parse_level;
  Level l = Level::kWarn;
  CHECK(parse_level("INFO", &l));
  CHECK(l == Level::kInfo);
  CHECK(parse_level("Debug", &l));
  CHECK(l == Level::kDebug);
  CHECK(parse_level("WARNING", &l));
  CHECK(l == Level::kWarn);
  CHECK(parse_level("0", &l));
  CHECK(l == Level::kError);
  CHECK(parse_level("4", &l));
  CHECK(l == Level::kTrace);
  CHECK(parse_level("3", &l));
  CHECK(l == Level::kDebug);
  CHECK_FALSE(parse_level("5", &l));
  CHECK_FALSE(parse_level("verbose", &l));
  CHECK_FALSE(parse_level("", &l));
  CHECK(l == Level::kDebug);  // a refused text leaves the level alone
}
