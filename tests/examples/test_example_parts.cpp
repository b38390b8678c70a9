// The data-parallel example's single-process parts, checked against serial references: the MLP's gradient
// against finite differences, the optimizers against their textbook formulas, snapshots against corruption and
// crashes, and the gradient buckets against the tensors they must cover.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "bytes.hpp"
#include "checkpoint.hpp"
#include "dataset.hpp"
#include "grad_sync.hpp"
#include "mlp.hpp"
#include "optimizer.hpp"

using namespace examples;
namespace fs = std::filesystem;

TEST_CASE("teacher data set is deterministic and uses every class", "[examples]") {
  const Dataset a = make_teacher_dataset(500, 7, 3, 42), b = make_teacher_dataset(500, 7, 3, 42);
  const Dataset c = make_teacher_dataset(500, 7, 3, 43);
  CHECK(a.x == b.x);
  CHECK(a.y == b.y);
  CHECK(a.x != c.x);
  std::vector<int> per_class(3, 0);
  for (int32_t y : a.y) per_class.at(static_cast<std::size_t>(y))++;
  for (int n : per_class) CHECK(n > 20);
  Rng r1(5), r2(5);
  CHECK(draw_indices(r1, 500, 64) == draw_indices(r2, 500, 64));
  CHECK(r1.state() == r2.state());
}

TEST_CASE("MLP gradient matches finite differences and arrives last tensor first", "[examples]") {
  const Dataset data = make_teacher_dataset(40, 5, 3, 7);
  Mlp model({5, 6, 4, 3}, 11);
  const std::vector<uint32_t> batch = {0, 3, 7, 11, 19, 23, 31};  // odd size, not a power of two
  std::vector<float> grad(model.param_count());
  std::vector<std::size_t> order;
  model.forward_backward(data, batch, grad, [&](std::size_t t) { order.push_back(t); });
  std::vector<std::size_t> expected(model.tensors().size());
  std::iota(expected.rbegin(), expected.rend(), 0u);
  CHECK(order == expected);

  std::vector<float> scratch(model.param_count());
  const float h = 1e-2f;
  int checked = 0;
  for (std::size_t i = 0; i < model.param_count(); i += 3, ++checked) {
    const float saved = model.params()[i];
    model.params()[i] = saved + h;
    const double up = model.forward_backward(data, batch, scratch);
    model.params()[i] = saved - h;
    const double down = model.forward_backward(data, batch, scratch);
    model.params()[i] = saved;
    INFO("parameter " << i);
    CHECK(grad[i] == Approx((up - down) / (2 * h)).margin(2e-3).epsilon(2e-2));
  }
  CHECK(checked > 20);
}

TEST_CASE("a single replica learns the teacher with sgd and adam", "[examples]") {
  const Dataset data = make_teacher_dataset(1024, 8, 3, 1);
  for (const char* name : {"sgd", "adam"}) {
    Mlp model({8, 32, 3}, 2);
    OptimizerConfig config;
    config.name = name;
    config.lr = config.name == "adam" ? 0.01f : 0.1f;
    auto opt = make_optimizer(config, model.param_count());
    std::vector<float> grad(model.param_count());
    Rng rng(3);
    const double before = model.evaluate(data).loss;
    for (int step = 0; step < 150; ++step) {
      const auto batch = draw_indices(rng, data.size(), 32);
      model.forward_backward(data, batch, grad);
      opt->step(model.params(), grad);
    }
    INFO(name);
    CHECK(model.evaluate(data).loss < 0.7 * before);
  }
}

namespace {
// Parameters {1, 2, 3} after two steps with gradients g1 then g2.
std::vector<float> two_steps(const OptimizerConfig& c, const std::vector<float>& g1, const std::vector<float>& g2) {
  auto opt = make_optimizer(c, 3);
  std::vector<float> p = {1.0f, 2.0f, 3.0f};
  opt->step(p, g1);
  opt->step(p, g2);
  return p;
}
}  // namespace

TEST_CASE("optimizers follow their formulas and resume exactly from saved state", "[examples]") {
  const std::vector<float> g1 = {0.5f, -1.0f, 2.0f}, g2 = {-0.25f, 0.75f, 1.5f};
  SECTION("sgd with momentum") {
    OptimizerConfig c;
    c.lr = 0.1f;
    c.momentum = 0.9f;
    const std::vector<float> p = two_steps(c, g1, g2);
    for (std::size_t i = 0; i < 3; ++i) {
      const float v1 = g1[i], v2 = 0.9f * v1 + g2[i];
      CHECK(p[i] == Approx(static_cast<float>(i + 1) - 0.1f * v1 - 0.1f * v2));
    }
  }
  SECTION("adam") {
    OptimizerConfig c;
    c.name = "adam";
    c.lr = 0.01f;
    const std::vector<float> p = two_steps(c, g1, g2);
    for (std::size_t i = 0; i < 3; ++i) {
      double m = 0, v = 0, q = static_cast<double>(i + 1);
      for (int t = 1; t <= 2; ++t) {
        const double g = t == 1 ? g1[i] : g2[i];
        m = 0.9 * m + 0.1 * g;
        v = 0.999 * v + 0.001 * g * g;
        q -= 0.01 * (m / (1 - std::pow(0.9, t))) / (std::sqrt(v / (1 - std::pow(0.999, t))) + 1e-8);
      }
      CHECK(p[i] == Approx(q).epsilon(1e-5));
    }
  }
  for (const char* name : {"sgd", "adam"}) {
    OptimizerConfig c;
    c.name = name;
    auto straight = make_optimizer(c, 3), first = make_optimizer(c, 3), second = make_optimizer(c, 3);
    std::vector<float> a = {1, 2, 3}, b = a;
    straight->step(a, g1);
    straight->step(a, g2);
    first->step(b, g1);
    ByteWriter w;
    first->save(w);
    ByteReader r(w.bytes().data(), w.bytes().size());
    second->load(r);
    second->step(b, g2);
    INFO(name);
    CHECK(a == b);  // bit-identical, not approximately equal
  }
  CHECK_THROWS_AS(make_optimizer(OptimizerConfig{"rmsprop"}, 3), std::invalid_argument);
}

TEST_CASE("snapshots round-trip, reject corruption and are replaced atomically", "[examples]") {
  Snapshot s;
  s.step = 17;
  s.rng = Rng(9).state();
  s.widths = {4, 5, 2};
  s.optimizer = "adam";
  s.params = {1.5f, -2.25f, 3.0f, 0.0f, 7.0f};
  s.optimizer_state = {1, 2, 3, 250};
  const std::vector<uint8_t> bytes = encode_snapshot(s);
  const Snapshot back = decode_snapshot(bytes, "memory");
  CHECK(back.step == 17);
  CHECK(back.rng == s.rng);
  CHECK(back.widths == s.widths);
  CHECK(back.optimizer == "adam");
  CHECK(back.params == s.params);
  CHECK(back.optimizer_state == s.optimizer_state);
  for (std::size_t i : {std::size_t{0}, std::size_t{9}, bytes.size() / 2, bytes.size() - 1}) {
    std::vector<uint8_t> bad = bytes;
    bad[i] ^= 0x10;
    CHECK_THROWS_AS(decode_snapshot(bad, "memory"), std::runtime_error);
  }
  CHECK_THROWS_AS(decode_snapshot(std::vector<uint8_t>(bytes.begin(), bytes.end() - 5), "memory"), std::runtime_error);

  const fs::path dir = fs::temp_directory_path() / ("dcomm-ckpt-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  CHECK_FALSE(find_latest_snapshot(dir.string()).has_value());  // a missing directory is no snapshot
  for (int64_t step : {5, 10, 15}) {
    s.step = step;
    write_snapshot_file(dir.string(), step, encode_snapshot(s), 2);
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"step-0000000010.ckpt", "step-0000000015.ckpt"});  // no temp files left
  auto latest = find_latest_snapshot(dir.string());
  REQUIRE(latest.has_value());
  CHECK(decode_snapshot(latest->bytes, latest->path).step == 15);

  // A torn newest file (what a crash without the rename protocol could leave) is skipped, not trusted.
  { std::ofstream(dir / "step-0000000020.ckpt", std::ios::binary) << "DCOMMCK1 torn"; }
  latest = find_latest_snapshot(dir.string());
  REQUIRE(latest.has_value());
  CHECK(decode_snapshot(latest->bytes, latest->path).step == 15);
  fs::remove_all(dir);
}

TEST_CASE("gradient buckets cover every tensor once, last first, within the size cap", "[examples]") {
  const Mlp model({13, 17, 9, 5}, 1);  // tensors of 221, 17, 153, 9, 45, 5 floats
  const auto& tensors = model.tensors();
  for (std::size_t cap :
       {std::size_t{0}, std::size_t{4}, std::size_t{100}, std::size_t{700}, std::size_t{1000}, std::size_t{1} << 20}) {
    INFO("bucket bytes " << cap);
    const std::vector<Bucket> buckets = assign_buckets(tensors, cap);
    std::size_t next_last = tensors.size() - 1, covered = 0;
    for (const Bucket& b : buckets) {
      CHECK(b.last_tensor == next_last);  // consecutive, in backward order
      CHECK(b.first_tensor <= b.last_tensor);
      CHECK(b.offset == tensors[b.first_tensor].offset);
      CHECK(b.count == tensors[b.last_tensor].offset + tensors[b.last_tensor].count - b.offset);
      if (b.first_tensor != b.last_tensor) CHECK(b.count * sizeof(float) <= cap);
      covered += b.count;
      next_last = b.first_tensor - 1;
    }
    CHECK(buckets.back().first_tensor == 0);
    CHECK(covered == model.param_count());
    if (cap == 0) CHECK(buckets.size() == tensors.size());
    if (cap == std::size_t{1} << 20) CHECK(buckets.size() == 1);
  }
}
