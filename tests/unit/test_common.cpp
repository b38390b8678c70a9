#include <catch2/catch.hpp>

#include <dcomm/dcomm.hpp>

#include "common/deadline.hpp"
#include "common/env.hpp"

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
