// Experiment configs, the runner and the summaries: parse errors that name file, line and key;
// Control replicas bit-identical (churn exactly 0); IMPL under atomics not; resume reuses
// finished replicas; two "ranks" sharing a folder give the single-process summary.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "experiments/report.hpp"
#include "experiments/runner.hpp"

using namespace fplab;
using namespace fplab::experiments;
namespace fs = std::filesystem;

namespace {

// Temporary names carry the process id: every worktree's build runs this test, often at once,
// and one run's remove_all of a shared folder made another's checkpoint writes fail.
std::string temp_name(const std::string& name) { return "fplab_test_" + std::to_string(::getpid()) + "_" + name; }

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = (fs::temp_directory_path() / temp_name(name)).string();
  std::ofstream(path) << text;
  return path;
}

const models::Dataset& data() {
  static const models::Dataset d = models::load_fashion_mnist();
  return d;
}

const char* kTiny = R"(name = "tiny"
description = "test"
[data]
train_subset = 600
[model]
name = "mlp"
hidden = [16]
[training]
epochs = 1
batch = 50
[run]
profiles = ["synthetic"]
variants = ["impl", "control"]
replicas = 3
)";

// default mode: atomics everywhere; deterministic mode: left folds.
std::pair<models::OpTable, models::OpTable> synthetic(const std::string&) {
  return {models::op_table_preset("atomic"), models::op_table_preset("seq")};
}

}  // namespace

TEST_CASE("experiment config: errors name the file, the line and the key") {
  struct Case {
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {"name = \"x\"\n[run]\nprofiles = [\"v100\"]\nreplicaz = 3\n", ":4: key 'run.replicaz': unknown key"},
      {"name = \"x\"\n[run]\nprofiles = [\"v100\"]\nvariants = [\"impl\", \"nope\"]\n", ":4: key 'run.variants': unknown variant 'nope'"},
      {"name = \"x\"\n[training]\nepochs = \"three\"\n[run]\nprofiles = [\"v100\"]\n", ":3: key 'training.epochs': must be a whole number"},
      {"name = \"x\"\n[run]\nprofiles = [\"v100\"]\nreplicas = 1\n", "run.replicas' must be at least 2"},
      {"description = \"no name\"\n[run]\nprofiles = [\"v100\"]\n", "missing key 'name'"},
      {"name = \"x\"\n[run\nprofiles = [\"v100\"]\n", ".toml:2:"},
  };
  int i = 0;
  for (const auto& c : cases) {
    const auto path = write_temp("bad" + std::to_string(i++) + ".toml", c.text);
    INFO(c.text);
    CHECK_THROWS_WITH(load_experiment(path), Catch::Contains(c.expect) && Catch::Contains(path));
    fs::remove(path);
  }
}

TEST_CASE("runner: Control replicas are bit-identical (churn 0, L2 0); IMPL under atomics is not; resume and ranks agree") {
  const auto path = write_temp("tiny.toml", kTiny);
  const auto experiment = load_experiment(path);
  const std::string out = (fs::temp_directory_path() / temp_name("run")).string();
  fs::remove_all(out);
  RunOptions o;
  o.out_dir = out;
  o.jobs = 2;
  o.quiet = true;
  const auto records = run_experiment(experiment, data(), synthetic, o);
  REQUIRE(records.size() == 6);
  const auto groups = summarize(experiment, records, data().test.labels);
  const auto& impl = groups[0];
  const auto& control = groups[1];
  CHECK(control.identical);
  CHECK(control.churn.mean == 0);
  CHECK(control.l2_mean == 0);
  CHECK(control.accuracy_std == 0);
  CHECK_FALSE(impl.identical);
  CHECK(impl.l2_mean > 0);
  const auto json = summary_json(experiment, groups).dump();

  // Resume: drop one replica's file; the others are reused, the summary does not change.
  fs::remove(out + "/replicas/synthetic.impl.1.ckpt");
  o.resume = true;
  const auto resumed = run_experiment(experiment, data(), synthetic, o);
  CHECK(summary_json(experiment, summarize(experiment, resumed, data().test.labels)).dump() == json);
  CHECK(fs::exists(out + "/replicas/synthetic.impl.1.ckpt"));

  // Two ranks in one folder: rank 1 runs its share, rank 0 its share and collects.
  const std::string split = out + "_ranks";
  fs::remove_all(split);
  RunOptions r1 = o, r0 = o;
  r1.out_dir = r0.out_dir = split;
  r1.resume = r0.resume = false;
  r1.rank = 1, r1.ranks = 2, r0.rank = 0, r0.ranks = 2;
  run_experiment(experiment, data(), synthetic, r1);
  const auto collected = run_experiment(experiment, data(), synthetic, r0);
  CHECK(summary_json(experiment, summarize(experiment, collected, data().test.labels)).dump() == json);

  write_results(experiment, records, groups, data().class_names, out, "test");
  for (const char* f : {"summary.json", "replicas.csv", "per_class.csv", "pairs.csv", "report.md", "report.html"})
    CHECK(fs::exists(out + "/" + f));
  fs::remove_all(out);
  fs::remove_all(split);
  fs::remove(path);
}
