// The twin's replica groups and torch_churn's program, with a stand-in trainer (no LibTorch): the
// seeds each variant gives, churn / accuracy / L2 / "identical" against direct computations on
// what the stand-in returned, the one-line errors and exit code 2, and --json written whole.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "apps/torch_churn.hpp"
#include "experiments/twin_replicas.hpp"
#include "util/sha256.hpp"

using namespace fplab;
using namespace fplab::experiments;
namespace fs = std::filesystem;
using models::torch_twin::TwinOptions;
using models::torch_twin::TwinResult;

namespace {

const char* kRecipe = R"(name = "twin_tiny"
description = "test"
[data]
train_subset = 300
[model]
name = "mlp"
hidden = [8]
[training]
epochs = 1
[run]
profiles = ["h100"]
variants = ["impl"]
replicas = 3
)";

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = (fs::temp_directory_path() / ("fplab_twin_" + name)).string();
  std::ofstream(path) << text;
  return path;
}

// An empty folder of that name under the system's temporary folder.
fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("fplab_twin_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

const models::Dataset& tiny_data() {  // 20 test images are enough for the stand-in
  static const models::Dataset d = [] {
    models::Dataset d;
    d.test.labels.assign(20, 0);
    for (size_t i = 0; i < 20; ++i) d.test.labels[i] = static_cast<uint8_t>(i % 10);
    return d;
  }();
  return d;
}

// A stand-in trainer: deterministic options give a function of the algorithmic seed alone;
// default options also change prediction `call % 20` (a different one each call) and one weight.
struct StandIn {
  int calls = 0;
  int fail_at = -1;  // throw on this call
  std::vector<TwinResult> given;
  std::vector<TwinOptions> asked;
  TwinResult operator()(const models::TrainConfig& config, const models::Dataset& data, const TwinOptions& options) {
    asked.push_back(options);
    if (calls == fail_at) throw std::runtime_error("LibTorch: CUDA out of memory (stand-in)");
    TwinResult r;
    r.backend = options.deterministic ? "stand-in, deterministic" : "stand-in, default";
    r.weights = {1.0f, 2.0f, static_cast<float>(config.algo_seed)};
    r.predictions.resize(data.test.labels.size());
    for (size_t i = 0; i < r.predictions.size(); ++i)
      r.predictions[i] = static_cast<uint8_t>((i + config.algo_seed) % 10);
    if (!options.deterministic) {
      r.predictions[calls % r.predictions.size()] ^= 1;
      r.weights[0] += 0.25f * static_cast<float>(calls);
    }
    size_t correct = 0;
    for (size_t i = 0; i < r.predictions.size(); ++i) correct += r.predictions[i] == data.test.labels[i];
    r.test_accuracy = static_cast<double>(correct) / static_cast<double>(r.predictions.size());
    r.epoch_seconds = {0.5};
    ++calls;
    given.push_back(r);
    return r;
  }
};

// Runs the program with argv, capturing stderr; returns the exit code.
int run_program(std::vector<std::string> args, const TwinTrainer& train, bool cuda, std::string* err = nullptr) {
  args.insert(args.begin(), "torch_churn");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  const int rc = app::torch_churn_main(static_cast<int>(argv.size()), argv.data(), train, [cuda](std::string* why) {
    if (!cuda && why) *why = "no CUDA device for LibTorch (stand-in)";
    return cuda;
  });
  std::cerr.rdbuf(old);
  if (err) *err = captured.str();
  return rc;
}

}  // namespace

TEST_CASE("twin replicas: seeds by variant, and the group's metrics against direct computations") {
  const Experiment e = load_experiment(write_temp("recipe.toml", kRecipe));
  for (const bool deterministic : {true, false})
    for (const Variant variant : {Variant::impl, Variant::algo}) {
      StandIn stand_in;
      TwinOptions options;
      options.deterministic = deterministic;
      std::vector<size_t> progressed;
      const TwinGroup g = run_twin_group(e, tiny_data(), variant, 4, options, std::ref(stand_in),
                                         [&](size_t i, const TwinReplica&) { progressed.push_back(i); });
      INFO((deterministic ? "deterministic" : "default") << ", " << variant_name(variant));
      CHECK(g.mode == (deterministic ? "deterministic" : "default"));
      CHECK(progressed == std::vector<size_t>{0, 1, 2, 3});
      REQUIRE(g.replicas.size() == 4);
      REQUIRE(stand_in.given.size() == 4);
      for (size_t i = 0; i < 4; ++i) {
        CHECK(g.replicas[i].algo_seed == e.algo_seed + (variant == Variant::algo ? i : 0));
        const auto& w = stand_in.given[i].weights;
        CHECK(g.replicas[i].weights_sha256 == util::sha256_hex(w.data(), w.size() * sizeof(float)));
        CHECK(g.replicas[i].seconds == 0.5);
      }
      // Churn: the mean over pairs of the fraction of differing predictions, counted here.
      double churn = 0, pairs = 0, l2 = 0;
      for (size_t a = 0; a < 4; ++a)
        for (size_t b = a + 1; b < 4; ++b) {
          const auto &pa = stand_in.given[a].predictions, &pb = stand_in.given[b].predictions;
          size_t differ = 0;
          for (size_t i = 0; i < pa.size(); ++i) differ += pa[i] != pb[i];
          churn += static_cast<double>(differ) / static_cast<double>(pa.size());
          double na = 0, nb = 0, d = 0;
          for (float x : stand_in.given[a].weights) na += double(x) * x;
          for (float x : stand_in.given[b].weights) nb += double(x) * x;
          for (size_t i = 0; i < 3; ++i) {
            const double t =
                stand_in.given[a].weights[i] / std::sqrt(na) - stand_in.given[b].weights[i] / std::sqrt(nb);
            d += t * t;
          }
          l2 += std::sqrt(d);
          ++pairs;
        }
      CHECK(g.churn.pairs == 6);
      CHECK(g.churn.mean == Approx(churn / pairs).margin(1e-12));
      CHECK(g.churn.ci_low <= g.churn.mean);
      CHECK(g.churn.ci_high >= g.churn.mean);
      CHECK(g.l2 == Approx(l2 / pairs).margin(1e-9));
      double acc_mean = 0;
      for (const auto& r : stand_in.given) acc_mean += r.test_accuracy / 4;
      CHECK(g.accuracy_mean == Approx(acc_mean));
      const bool same = deterministic && variant == Variant::impl;
      CHECK(g.identical == same);
      CHECK((g.churn.mean == 0) == same);
      CHECK(g.backend == stand_in.given[0].backend);
    }
}

TEST_CASE("torch_churn: options reach the trainer; CUBLAS_WORKSPACE_CONFIG only where deterministic runs on CUDA") {
  const std::string recipe = write_temp("recipe.toml", kRecipe);
  {
    unsetenv("CUBLAS_WORKSPACE_CONFIG");
    StandIn stand_in;
    std::string err;
    REQUIRE(run_program({recipe, "--replicas", "2", "--tf32", "cudnn", "--threads", "3", "--quiet"}, std::ref(stand_in),
                        true, &err) == 0);
    REQUIRE(stand_in.asked.size() == 4);
    for (size_t i = 0; i < 4; ++i) {
      CHECK(stand_in.asked[i].device == models::torch_twin::Device::cuda);
      CHECK(stand_in.asked[i].deterministic == (i >= 2));  // default first, then deterministic
      CHECK(stand_in.asked[i].tf32_cudnn);
      CHECK(!stand_in.asked[i].tf32_cublas);
      CHECK(stand_in.asked[i].threads == 3);
    }
    const char* workspace = std::getenv("CUBLAS_WORKSPACE_CONFIG");
    CHECK((workspace && std::string(workspace) == ":4096:8"));
  }
  {
    unsetenv("CUBLAS_WORKSPACE_CONFIG");
    StandIn stand_in;
    REQUIRE(run_program({recipe, "--replicas", "2", "--modes", "default", "--tf32", "all", "--quiet"},
                        std::ref(stand_in), true) == 0);
    REQUIRE(stand_in.asked.size() == 2);
    CHECK(stand_in.asked[0].tf32_cublas);
    CHECK(stand_in.asked[0].tf32_cudnn);
    CHECK(!stand_in.asked[0].deterministic);
    CHECK(std::getenv("CUBLAS_WORKSPACE_CONFIG") == nullptr);  // PyTorch's default mode, untouched
  }
  {
    StandIn stand_in;
    REQUIRE(run_program({recipe, "--replicas", "2", "--device", "cpu", "--modes", "deterministic", "--quiet"},
                        std::ref(stand_in), false) == 0);
    REQUIRE(stand_in.asked.size() == 2);
    CHECK(stand_in.asked[0].device == models::torch_twin::Device::cpu);
    CHECK(!stand_in.asked[0].tf32_cudnn);
  }
}

TEST_CASE("torch_churn: runs the modes, prints the table, writes --json whole") {
  const std::string recipe = write_temp("recipe.toml", kRecipe);
  const fs::path dir = fresh_dir("out");
  const std::string json_path = (dir / "real.json").string();
  StandIn stand_in;
  std::string err;
  const int rc =
      run_program({recipe, "--replicas", "3", "--json", json_path, "--quiet"}, std::ref(stand_in), true, &err);
  INFO(err);
  REQUIRE(rc == 0);
  CHECK(stand_in.calls == 6);  // default, then deterministic
  std::ifstream in(json_path);
  const auto doc = nlohmann::json::parse(in);
  REQUIRE(doc["groups"].size() == 2);
  CHECK(doc["groups"][0]["mode"] == "default");
  CHECK(doc["groups"][0]["identical"] == false);
  CHECK(doc["groups"][1]["mode"] == "deterministic");
  CHECK(doc["groups"][1]["identical"] == true);
  CHECK(doc["groups"][1]["replicas"].size() == 3);
  CHECK(doc["experiment"] == "twin_tiny");
  size_t files = 0;
  for (const auto& f : fs::directory_iterator(dir)) files += f.is_regular_file();
  CHECK(files == 1);  // no temporary left beside it
  fs::remove_all(dir);
}

TEST_CASE("torch_churn: bad input is one line on stderr, exit code 2, no result file") {
  const std::string recipe = write_temp("recipe.toml", kRecipe);
  const fs::path dir = fresh_dir("bad");
  const std::string json_path = (dir / "real.json").string();
  StandIn stand_in;
  struct Case {
    std::vector<std::string> args;
    bool cuda;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{recipe, "--json", json_path}, false, "no CUDA device"},
      {{recipe, "--device", "cpu", "--data-dir", "/nonexistent/fashion", "--json", json_path},
       true,
       "/nonexistent/fashion"},
      {{recipe, "--modes", "default,fast"}, true, "--modes"},
      {{recipe, "--replicas", "1"}, true, "--replicas"},
      {{recipe, "--device", "cpu", "--tf32", "cudnn"}, false, "TF32"},
      {{recipe, "--json", (dir / "no" / "such" / "x.json").string()}, true, "no folder"},
      {{(dir / "missing.toml").string()}, true, "missing.toml"},
      {{recipe, "--variant", "order"}, true, "--variant"},
  };
  for (const auto& c : cases) {
    std::string err;
    const int rc = run_program(c.args, std::ref(stand_in), c.cuda, &err);
    INFO(c.args.back() << ": " << err);
    CHECK(rc == 2);
    CHECK(err.find(c.says) != std::string::npos);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    CHECK(err.rfind("torch_churn: error: ", 0) == 0);
  }
  CHECK(stand_in.calls == 0);  // every one of them found out before any training
  // A trainer that fails halfway (LibTorch's errors reach here as one line): exit 2, no file.
  StandIn failing;
  failing.fail_at = 3;
  std::string err;
  CHECK(run_program({recipe, "--replicas", "3", "--json", json_path}, std::ref(failing), true, &err) == 2);
  CHECK(err == "torch_churn: error: LibTorch: CUDA out of memory (stand-in)\n");
  CHECK(!fs::exists(json_path));
  CHECK(fs::is_empty(dir));
  fs::remove_all(dir);
}
