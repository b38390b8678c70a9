// The engine's selection: DCOMM_ALGO, set_algorithm, the cost model (one and two link classes), explain(), the
// tuning file, and the hierarchical rows chosen and failing across simulated nodes.

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <dcomm/error.hpp>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>

#include "collectives/call_check.hpp"
#include "collectives/cost_model.hpp"
#include "collectives/selector.hpp"
#include "collectives/topology.hpp"
#include "collectives/validate.hpp"
#include "tests/collectives/harness.hpp"

using namespace dcomm;
using namespace dcomm::coll;

using test::fake_view;
using test::invalid_message;
using test::soon;

TEST_CASE("DCOMM_ALGO parsing accepts both spellings and lists valid names", "[collectives][engine]") {
  auto m = parse_algorithm_spec("allreduce:ring, broadcast:binomial,all_gather:recursive_doubling");
  CHECK(m.at(Collective::kAllReduce) == "ring");
  CHECK(m.at(Collective::kBroadcast) == "binomial");
  CHECK(m.at(Collective::kAllGather) == "recursive_doubling");
  CHECK(parse_algorithm_spec("all-reduce:tree").at(Collective::kAllReduce) == "tree");
  CHECK(parse_algorithm_spec("").empty());
  CHECK_THAT(invalid_message([] { parse_algorithm_spec("allreduce:nosuch"); }),
             Catch::Contains("unknown all_reduce algorithm 'nosuch'") &&
                 Catch::Contains(algorithm_names(Collective::kAllReduce)));
  // The public list is the table's rows, in table order, with no name twice per collective (walked, not pinned,
  // so that a new row needs no edit here).
  std::size_t rows = 0;
  for (Collective c : {Collective::kAllReduce, Collective::kBroadcast, Collective::kReduce, Collective::kScatter,
                       Collective::kGather, Collective::kAllGather, Collective::kReduceScatter, Collective::kAllToAll,
                       Collective::kBarrier}) {
    std::vector<std::string> names = dcomm::algorithms(c);
    rows += names.size();
    CHECK(!names.empty());
    std::vector<std::string> from_table;
    for (const Algorithm* a : algorithms_for(c)) from_table.emplace_back(a->name);
    CHECK(names == from_table);
    std::sort(from_table.begin(), from_table.end());
    CHECK(std::adjacent_find(from_table.begin(), from_table.end()) == from_table.end());
  }
  CHECK(rows == algorithm_table().size());
  CHECK_THAT(invalid_message([] { parse_algorithm_spec("allreduce"); }), Catch::Contains("<collective>:<algorithm>"));
  CHECK_THAT(invalid_message([] { parse_algorithm_spec("everything:ring"); }), Catch::Contains("reduce_scatter"));
}

TEST_CASE("the cost model picks latency-bound algorithms for tiny messages, bandwidth-bound for large",
          "[collectives][engine]") {
  CostParams p;
  p.alpha = 10e-6;
  p.beta = 1e-10;
  p.gamma = 2e-11;
  for (int size : {6, 8, 16}) {
    GroupView v = fake_view(0, size);
    std::string tiny = cheapest(sample_args(Collective::kAllReduce, 8, size), v, p)->name;
    std::string large = cheapest(sample_args(Collective::kAllReduce, 64u << 20, size), v, p)->name;
    INFO("P=" << size << " tiny " << tiny << " large " << large);
    CHECK((tiny == "butterfly" || tiny == "tree" || tiny == "bruck"));  // bruck: ⌈log₂P⌉ rounds, no folding
    CHECK((large == "ring" || large == "rabenseifner"));
    CHECK(std::string(cheapest(sample_args(Collective::kBroadcast, 8, size), v, p)->name) == "binomial");
    std::string bcast = cheapest(sample_args(Collective::kBroadcast, 64u << 20, size), v, p)->name;
    CHECK((bcast == "scatter_allgather" || bcast == "chain"));
  }
  // one_to_all never wins: the root's link carries 2(P-1)n bytes.
  for (std::size_t bytes : {std::size_t{1}, std::size_t{1} << 20, std::size_t{1} << 28}) {
    for (const Prediction& pr : predict(sample_args(Collective::kAllReduce, bytes, 8), fake_view(0, 8), p)) {
      if (std::string(pr.algorithm->name) == "one_to_all") {
        CHECK(pr.seconds > find_algorithm(Collective::kAllReduce, "ring")->cost(p, static_cast<double>(bytes), 8));
      }
    }
  }
}

TEST_CASE("a by_name_only row is priced but never the model's choice", "[collectives][engine]") {
  const Algorithm* pipeline = find_algorithm(Collective::kReduce, "pipeline");
  REQUIRE(pipeline != nullptr);
  CHECK(pipeline->by_name_only);
  CostParams p;
  for (int size : {2, 3, 9}) {
    for (std::size_t bytes : {std::size_t{8}, std::size_t{1} << 20, std::size_t{1} << 28}) {
      Args args = sample_args(Collective::kReduce, bytes, size);
      std::vector<Prediction> all = predict(args, fake_view(0, size), p);
      CHECK(std::any_of(all.begin(), all.end(), [&](const Prediction& pr) { return pr.algorithm == pipeline; }));
      CHECK(cheapest(args, fake_view(0, size), p) != pipeline);
    }
  }
  // Its own cost: (P + k - 2)(α + n/k·(β + γ)), k = ⌈n / chunk⌉; binomial's exactly when P = 2 and k = 1.
  const double n = 4 * p.chunk_bytes;
  CHECK(pipeline->cost(p, n, 3) == Approx(5 * (p.alpha + p.chunk_bytes * (p.beta + p.gamma))));
  CHECK(pipeline->cost(p, 100, 2) == Approx(find_algorithm(Collective::kReduce, "binomial")->cost(p, 100, 2)));
  CHECK(pipeline->cost(p, n, 1) == 0);
}

TEST_CASE("explain lists every candidate and the choice; set_algorithm overrides", "[collectives][engine]") {
  auto records = test::run_group(2, [](const GroupView& view, test::RankRecord& rec) {
    auto engine = Engine::create(view);
    std::string text = engine->explain(Collective::kAllReduce, 1 << 20);
    // On device buffers: the device's costs, and the choice is a row that handles them.
    const std::string on_device = engine->explain(Collective::kAllReduce, 1 << 20, Device::cuda(0));
    for (const char* w : {"buffers on cuda:0", "device's costs", "chunk 8.0 MiB", "choice: butterfly"}) {
      if (on_device.find(w) == std::string::npos) rec.failures.push_back(std::string("device explain lacks ") + w + ": " + on_device);
    }
    std::vector<std::string> wanted = {"choice:", "cost model", "link probe"};
    for (const Algorithm* a : algorithms_for(Collective::kAllReduce)) wanted.push_back(std::string("  ") + a->name);
    for (const std::string& w : wanted) {
      if (text.find(w) == std::string::npos) rec.failures.push_back("explain lacks " + w + ": " + text);
    }
    // The times line up: right-aligned after names padded to the longest, so every candidate line (without its
    // "<- cheapest" or "(by name only)" note) has one length, whatever the names' lengths.
    std::set<std::size_t> time_columns;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (!line.starts_with("  ")) continue;
      for (const char* note : {"  <- cheapest", "  (by name only)", "  (not for this group)"}) {
        if (line.ends_with(note)) line.resize(line.size() - std::string_view(note).size());
      }
      time_columns.insert(line.size());
    }
    if (time_columns.size() != 1) rec.failures.push_back("explain's times do not line up: " + text);
    engine->set_algorithm(Collective::kAllReduce, "tree");
    if (engine->explain(Collective::kAllReduce, 64).find("choice: tree (forced by set_algorithm") ==
        std::string::npos) {
      rec.failures.push_back("explain ignores set_algorithm");
    }
    std::string m = invalid_message([&] { engine->set_algorithm(Collective::kAllReduce, "fastest"); });
    if (m.find("valid names: ring, tree") == std::string::npos) rec.failures.push_back("bad name: " + m);
    engine->set_algorithm(Collective::kAllReduce, "");
    if (engine->explain(Collective::kAllReduce, 64).find("(cost model)") == std::string::npos) {
      rec.failures.push_back("set_algorithm(\"\") did not return to the cost model");
    }
    for (Collective c :
         {Collective::kBroadcast, Collective::kReduce, Collective::kScatter, Collective::kGather,
          Collective::kAllGather, Collective::kReduceScatter, Collective::kAllToAll, Collective::kBarrier}) {
      if (engine->explain(c, 4096).find("choice:") == std::string::npos) rec.failures.push_back("explain failed");
    }
  });
  CHECK(test::summarize(records).empty());
}

TEST_CASE("explain's table lines up names longer than 20 characters", "[collectives][engine]") {
  Algorithm short_row = *find_algorithm(Collective::kAllReduce, "ring");
  Algorithm long_row = short_row;
  long_row.name = "a_name_longer_than_twenty_characters";
  long_row.by_name_only = true;
  std::string text = format_predictions({{&short_row, 1.5e-3}, {&long_row, 2.25e-6}}, &short_row);
  std::istringstream lines(text);
  std::string a, b;
  std::getline(lines, a);
  std::getline(lines, b);
  CHECK(a.starts_with("  ring                                 "));
  CHECK(a.ends_with("  <- cheapest"));
  CHECK(b.starts_with("  a_name_longer_than_twenty_characters "));
  CHECK(b.ends_with("  (by name only)"));
  // The times end in the same column.
  CHECK(a.size() - std::string_view("  <- cheapest").size() == b.size() - std::string_view("  (by name only)").size());
}

TEST_CASE("DCOMM_ALGO and DCOMM_TUNING_FILE configure new engines", "[collectives][engine]") {
  std::string path = "/tmp/dcomm_tuning_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream out(path);
    out << R"({"alpha_s": 2e-6, "beta_s_per_byte": 3e-10, "gamma_s_per_byte": 1e-11})";
  }
  CostParams loaded = load_tuning_file(path, CostParams{});
  CHECK(loaded.alpha == 2e-6);
  CHECK(loaded.beta == 3e-10);
  test::ScopedEnv algo("DCOMM_ALGO", "allreduce:butterfly");
  test::ScopedEnv tuning("DCOMM_TUNING_FILE", path.c_str());
  auto records = test::run_group(3, [&](const GroupView& view, test::RankRecord& rec) {
    auto engine = Engine::create(view);
    std::string text = engine->explain(Collective::kAllReduce, 1 << 20);
    if (text.find("forced by DCOMM_ALGO") == std::string::npos) rec.failures.push_back("DCOMM_ALGO ignored: " + text);
    if (text.find("tuning file") == std::string::npos) rec.failures.push_back("tuning file ignored: " + text);
    std::vector<double> x = {1.0 + view.rank, 2.0};
    Args a;
    a.coll = Collective::kAllReduce;
    a.send = a.recv = Buffer(x);
    engine->run(a, "", soon(), 0);
    if (x[0] != 6.0 || x[1] != 6.0) rec.failures.push_back("wrong sum under DCOMM_ALGO");
  });
  CHECK(test::summarize(records).empty());
  {
    std::ofstream out(path);
    out << "{ not json";
  }
  CHECK_THAT(invalid_message([&] { load_tuning_file(path, CostParams{}); }), Catch::Contains(path));
  std::remove(path.c_str());
}

namespace {

// Between nodes 20 us and 1 GB/s; within a node (`two` only) 1 us and 10 GB/s.
CostParams one_class() {
  CostParams p;
  p.alpha = p.alpha_intra = 20e-6;
  p.beta = p.beta_intra = 1e-9;
  p.gamma = 5e-11;
  return p;
}

CostParams two_classes() {
  CostParams p = one_class();
  p.alpha_intra = 1e-6;
  p.beta_intra = 1e-10;
  return p;
}

}  // namespace

TEST_CASE("two link classes: hierarchical rows win across nodes, one node's choices stay", "[collectives][engine]") {
  const GroupView one_node = test::placed_view({"a", "a", "a", "a"});
  const GroupView two_nodes = test::placed_view({"a", "a", "b", "b"});
  const Collective kHier[] = {Collective::kAllReduce, Collective::kBroadcast,     Collective::kReduce,
                              Collective::kAllGather, Collective::kReduceScatter, Collective::kBarrier};
  for (Collective c : kHier) {
    for (std::size_t bytes : {std::size_t{64}, std::size_t{1} << 20, std::size_t{16} << 20}) {
      INFO(to_string(c) << " " << bytes << " B");
      Args a = sample_args(c, bytes, 4);
      // One node: the intra-node link changes nothing, and no hierarchical row is a candidate.
      const Algorithm* flat = cheapest(a, one_node, one_class());
      CHECK(cheapest(a, one_node, two_classes()) == flat);
      CHECK(std::string(flat->name) != "hier");
      // Across nodes with one link class, the hierarchical all_reduce moves more and never wins.
      if (c == Collective::kAllReduce) CHECK(std::string(cheapest(a, two_nodes, one_class())->name) != "hier");
    }
    // Across nodes with a fast node-local link, large calls (and the barrier, checks off) go hierarchical.
    INFO(to_string(c));
    CHECK(std::string(cheapest(sample_args(c, 4 << 20, 4), two_nodes, two_classes())->name) == "hier");
  }
  // The tuning file carries both classes; without the intra-node pair it means one class.
  std::string path = "/tmp/dcomm_tuning_two_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream out(path);
    out << tuning_json(two_classes());
  }
  CostParams loaded = load_tuning_file(path, CostParams{});
  CHECK(loaded.alpha_intra == 1e-6);
  CHECK(loaded.beta_intra == 1e-10);
  CHECK(loaded.beta == 1e-9);
  {
    std::ofstream out(path);
    out << R"({"alpha_s": 2e-6, "beta_s_per_byte": 3e-10})";
  }
  loaded = load_tuning_file(path, CostParams{});
  CHECK(loaded.alpha_intra == 2e-6);
  CHECK(loaded.beta_intra == 3e-10);
  std::remove(path.c_str());
}

TEST_CASE("a hierarchical algorithm named on a one-node group is refused on every rank, saying why",
          "[collectives][engine]") {
  auto records = test::run_group(3, [](const GroupView& view, test::RankRecord& rec) {
    auto engine = Engine::create(view);
    std::vector<float> x = {1.0f, 2.0f};
    Args a;
    a.coll = Collective::kAllReduce;
    a.send = a.recv = Buffer(x);
    std::string m = invalid_message([&] { engine->run(a, "hier", soon(), 0); });
    if (m.find("'hier' does not handle this call (it needs a group that spans two nodes or more") ==
        std::string::npos) {
      rec.failures.push_back("unclear refusal: " + m);
    }
    engine->run(a, "", soon(), 1);  // the group stays usable
    if (x[0] != 3.0f || x[1] != 6.0f) rec.failures.push_back("wrong sum after the refusal");
  });
  auto failures = test::summarize(records);
  INFO((failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}

TEST_CASE("across simulated nodes auto runs the hierarchical all_reduce and explain shows the topology",
          "[collectives][engine]") {
  std::string path = "/tmp/dcomm_tuning_auto_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream out(path);
    out << tuning_json(two_classes());
  }
  test::ScopedEnv tuning("DCOMM_TUNING_FILE", path.c_str());
  // The model's choice is under test: four rank threads share this machine's cores, where the group would measure
  // its choices itself (DCOMM_TUNE's default) and may find a flat row faster between threads of one process.
  test::ScopedEnv measured("DCOMM_TUNE", "off");
  auto records = test::run_group(
      4,
      [&](const GroupView& view, test::RankRecord& rec) {
        auto engine = Engine::create(view);
        std::string text = engine->explain(Collective::kAllReduce, 4 << 20);
        for (const char* w : {"topology: 2 nodes (ranks per node 2, 2)", "ranks 0,2 (leader 0)", "ranks 1,3 (leader 1)",
                              "within a node alpha 1.0 us", "choice: hier (cost model)"}) {
          if (text.find(w) == std::string::npos)
            rec.failures.push_back(std::string("explain lacks ") + w + ": " + text);
        }
        std::vector<double> x(1 << 19);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i % 1000) + view.rank;
        std::atomic<const char*> chosen{nullptr};
        Args a;
        a.coll = Collective::kAllReduce;
        a.send = a.recv = Buffer(x);
        a.chosen_algorithm = &chosen;
        engine->run(a, "", soon(), 0);
        if (std::string(chosen.load()) != "hier") rec.failures.push_back(std::string("auto chose ") + chosen.load());
        for (std::size_t i = 0; i < x.size(); ++i) {
          if (x[i] != 4.0 * static_cast<double>(i % 1000) + 6.0) {
            rec.failures.push_back(fmt::format("element {} is {}", i, x[i]));
            break;
          }
        }
      },
      "loopback", {0, 1, 0, 1});
  auto failures = test::summarize(records);
  INFO((failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
  std::remove(path.c_str());
}

TEST_CASE("a rank missing on the other node fails every survivor's hierarchical call, naming it where seen",
          "[collectives][engine]") {
  test::ScopedEnv no_check("DCOMM_CHECK_CALLS", "0");
  auto records = test::run_group(
      4,
      [](const GroupView& view, test::RankRecord& rec) {
        auto engine = Engine::create(view);
        if (view.rank == 3) return;  // never joins: its node's phase cannot finish, so neither can the rails
        std::vector<float> x(40, 1.0f);
        Args a;
        a.coll = Collective::kAllReduce;
        a.send = a.recv = Buffer(x);
        const std::string what = fmt::format("all_reduce[hier] rank {}/4", view.rank);
        try {
          engine->run(a, "hier", Deadline::after(std::chrono::seconds(2)), 0);
          rec.failures.push_back("no error");
        } catch (const Error& e) {
          const std::string m = e.what();
          bool kind = e.code() == ErrorCode::kTimeout || e.code() == ErrorCode::kRemoteError;
          if (!kind || m.rfind(what, 0) != 0) rec.failures.push_back(m);
          // Rank 3's node mate waits for it directly.
          if (view.rank == 2 && m.find("rank 3") == std::string::npos) rec.failures.push_back("no rank 3: " + m);
        }
      },
      "loopback", {0, 0, 1, 1});
  auto failures = test::summarize(records);
  INFO((failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}

TEST_CASE("report: probe time, fitted model and algorithm times over shm", "[.][measure]") {
  for (int size : {2, 4, 8}) {
    std::vector<double> create_ms(static_cast<std::size_t>(size));
    std::vector<std::string> report(static_cast<std::size_t>(size));
    test::run_group(
        size,
        [&](const GroupView& view, test::RankRecord&) {
          auto t0 = Clock::now();
          auto engine = Engine::create(view);
          create_ms[static_cast<std::size_t>(view.rank)] =
              std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
          std::string text = engine->explain(Collective::kAllReduce, 4 << 20);
          std::vector<float> x(1 << 20, 1.0f);
          uint64_t seq = 0;
          for (const Algorithm* a : algorithms_for(Collective::kAllReduce)) {
            Args args;
            args.coll = Collective::kAllReduce;
            args.send = args.recv = Buffer(x);
            engine->run(args, a->name, soon(), seq++);
            double best = 1e30;  // the fastest of 5: the least disturbed by other work on a shared machine
            for (int i = 0; i < 5; ++i) {
              auto t1 = Clock::now();
              engine->run(args, a->name, soon(), seq++);
              best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - t1).count());
            }
            text += fmt::format("\n  measured {:<14} {:8.2f} ms", a->name, best);
          }
          report[static_cast<std::size_t>(view.rank)] = text;
        },
        "shm");
    double worst = *std::max_element(create_ms.begin(), create_ms.end());
    WARN("P=" << size << ": Engine::create (probe) " << worst << " ms\n" << report[0]);
  }
}

TEST_CASE("calls on device buffers are priced with the device's costs, in device-sized pieces", "[collectives][engine]") {
  CostParams host;  // a group's host parameters: one node over shared memory
  host.alpha = kOneNodeAlpha;
  host.beta = kOneNodeBeta;
  host.gamma = kOneNodeGamma;
  const CostParams device = device_priced(host);
  CHECK(device.alpha == kDeviceAlpha);
  CHECK(device.chunk_bytes == host.device_chunk_bytes);
  CHECK(host.device_chunk_bytes == static_cast<double>(kDefaultDeviceChunkBytes));
  // A device call is one with a buffer labelled with a device, empty or not: a scatter's non-root passes an empty
  // default (host) send buffer and is still cut and checked as a device call with its root.
  Args scatter;
  scatter.coll = Collective::kScatter;
  scatter.recv = Buffer(reinterpret_cast<void*>(0x1000), 4, DType::kFloat32, Device::cuda(0));
  CHECK(on_device(scatter));
  CHECK(describe_call(scatter, "linear").device == 1);
  scatter.recv.device = Device::host();
  CHECK_FALSE(on_device(scatter));
  CHECK(describe_call(scatter, "linear").device == 0);
  // v-variants are cut in host pieces whatever the memory, so a rank of one whose empty buffers resolved to host
  // memory matches its peers on a device; so are calls of no elements.
  Args allv;
  allv.coll = Collective::kAllToAll;
  allv.vector_variant = true;
  allv.send = allv.recv = Buffer(reinterpret_cast<void*>(0x1000), 4, DType::kFloat32, Device::cuda(0));
  CHECK(describe_call(allv, "pairwise").device == 0);
  scatter.recv = Buffer(nullptr, 0, DType::kFloat32, Device::cuda(0));
  CHECK(describe_call(scatter, "linear").device == 0);
  for (int size : {2, 3, 4, 8}) {
    GroupView v = fake_view(0, size);
    // At 1 MiB a host call is bandwidth-bound (ring, rabenseifner) but a device one is latency-bound: a device
    // message costs ~25 us where the bytes cost a few (measured on an H100: butterfly, bruck, slot's fallback and
    // tree 64-76 us on 2 ranks, ring 73-85).
    const std::string host_choice = cheapest(sample_args(Collective::kAllReduce, 1 << 20, size), v, host)->name;
    const std::string device_choice =
        cheapest(sample_args(Collective::kAllReduce, 1 << 20, size, Device::cuda(0)), v, host)->name;
    INFO("P=" << size << " host " << host_choice << " device " << device_choice);
    CHECK((host_choice == "ring" || host_choice == "rabenseifner"));
    CHECK((device_choice == "butterfly" || device_choice == "bruck" || device_choice == "tree"));
    // Every row's device time at 8 B is at least a device message; no host-only row is a candidate.
    for (const Prediction& pr : predict(sample_args(Collective::kAllReduce, 8, size, Device::cuda(0)), v, host)) {
      INFO(pr.algorithm->name);
      CHECK(pr.seconds >= kDeviceAlpha);
      CHECK(std::string(pr.algorithm->name) != "cma");
      CHECK(std::string(pr.algorithm->name) != "shm_direct");
    }
    // A pipelined row is priced in device pieces: double_tree at 64 MiB costs what its row says at device_priced.
    const double n = 64.0 * (1 << 20);
    for (const Prediction& pr : predict(sample_args(Collective::kAllReduce, 64 << 20, size, Device::cuda(0)), v, host)) {
      if (std::string(pr.algorithm->name) == "double_tree") {
        CHECK(pr.seconds >= pr.algorithm->cost(device, n, size));
        CHECK(pr.seconds < pr.algorithm->cost(device, n, size) + 1e-3);
      }
    }
  }
}
