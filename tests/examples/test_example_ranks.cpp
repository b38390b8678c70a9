// The examples' distributed parts with threads as ranks (loopback transport): the bucketed gradient all-reduce
// against a serially computed average, and every SGD variant's parameter-server protocol, which must account for
// every gradient the learners sent and leave no receive behind.
#include <catch2/catch.hpp>
#include <mutex>

#include "grad_sync.hpp"
#include "learner.hpp"
#include "mlp.hpp"
#include "parameter_server.hpp"
#include "tests/runtime/ranks.hpp"

using namespace examples;

TEST_CASE("gradient buckets average like a serial reference, identically on every rank", "[examples]") {
  const Mlp model({13, 17, 9, 5}, 1);  // 6 tensors of odd sizes
  const std::size_t n = model.param_count();
  constexpr int kRanks = 3;
  for (const auto& [bucketing, bucket_bytes] :
       std::vector<std::pair<bool, std::size_t>>{{true, 0}, {true, 700}, {true, 1000}, {true, 1 << 20}, {false, 0}}) {
    INFO("bucketing " << bucketing << ", bucket bytes " << bucket_bytes);
    std::vector<std::vector<float>> result(kRanks);
    const auto failures = dcomm::test::run_ranks(kRanks, [&](dcomm::ProcessGroup& pg, std::vector<std::string>&) {
      std::vector<float> grad(n);
      GradSync sync(pg, model.tensors(), grad, {bucketing, bucket_bytes, ""});
      for (int round = 0; round < 2; ++round) {  // a second round reuses the buckets
        for (std::size_t i = 0; i < n; ++i) grad[i] = static_cast<float>(dcomm::test::value_of(pg.rank(), i + round));
        sync.begin();
        for (std::size_t t = model.tensors().size(); t-- > 0;) sync.on_ready(t);
        sync.finish();
      }
      result[static_cast<std::size_t>(pg.rank())] = grad;
    });
    REQUIRE(failures.empty());
    for (std::size_t i = 0; i < n; ++i) {
      double mean = 0;
      for (int r = 0; r < kRanks; ++r) mean += dcomm::test::value_of(r, i + 1) / kRanks;
      REQUIRE(result[0][i] == Approx(mean).epsilon(1e-6));
    }
    CHECK(result[1] == result[0]);  // bit-identical, the invariant data parallelism rests on
    CHECK(result[2] == result[0]);
  }
}

TEST_CASE("every SGD variant accounts for every gradient and stops cleanly", "[examples]") {
  VariantsConfig config;
  config.k = 2;
  config.epochs = 1;
  config.samples = 256;
  config.batch = 16;  // 16 mini-batches per epoch
  config.hidden = {16};
  config.compute_ms = 0;
  config.straggler_mean_ms = 1;
  config.timeout = std::chrono::seconds(30);
  constexpr int kLearners = 3;
  for (Variant v : kAllVariants) {
    INFO(to_string(v));
    VariantResult r;
    const auto failures =
        dcomm::test::run_ranks(kLearners + 1, [&](dcomm::ProcessGroup& pg, std::vector<std::string>&) {
          const Tags tags{static_cast<int>(v)};
          if (pg.rank() == 0) {
            r = run_parameter_server(pg, v, config, tags);
          } else {
            run_learner(pg, v, config, tags);
          }
          pg.barrier();  // nobody leaves while a message of this variant could still be in flight
        });
    REQUIRE(failures.empty());
    const VariantRule rule = rule_of(v, kLearners, config.k);
    CHECK(r.applied >= config.batches_per_epoch());
    CHECK(r.applied == r.updates * rule.gradients_per_update);
    CHECK(r.sent == r.applied + r.discarded + r.drained);
    CHECK(r.final_loss < r.initial_loss);
    if (rule.synchronous) CHECK(r.mean_staleness == 0);
    if (v == Variant::kKSync) CHECK(r.cancelled + r.discarded == r.updates * (kLearners - config.k));
    if (v == Variant::kFullySync || v == Variant::kKBatchSync) CHECK(r.cancelled == 0);
  }
}
