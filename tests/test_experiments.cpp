// Experiment configs, the runner and the summaries: parse errors that name file, line and key;
// Control replicas bit-identical (churn exactly 0); IMPL under atomics not; resume reuses
// finished replicas; two "ranks" sharing a folder give the single-process summary.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "experiments/report.hpp"
#include "experiments/report_document.hpp"
#include "experiments/runner.hpp"
#include "util/external_program.hpp"

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

const Provenance kProvenance{"fplab run 'tiny experiment.toml' --out x", "9.9.9 (git test)"};

// default mode: atomics everywhere; deterministic mode: left folds.
std::pair<profiles::OpTable, profiles::OpTable> synthetic(const std::string&) {
  return {profiles::op_table_preset("atomic"), profiles::op_table_preset("seq")};
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// What a paper needs from the output folder: provenance and recipe in summary.json, the
// intervals under names that say what they resample, the same content in both reports, and
// every figure in three formats where gnuplot is installed.
void check_written_results(const std::string& out, const std::vector<GroupSummary>& groups) {
  const auto summary = nlohmann::json::parse(read_text(out + "/summary.json"));
  CHECK(summary["fplab_version"] == kProvenance.version);
  CHECK(summary["command"] == kProvenance.command);
  CHECK(summary["recipe"]["model"]["name"] == "mlp");
  CHECK(summary["recipe"]["model"]["hidden"] == nlohmann::json::array({16}));
  CHECK(summary["recipe"]["data"]["train_subset"] == 600);
  CHECK(summary["recipe"]["training"]["batch"] == 50);
  CHECK(summary["recipe"]["run"]["replicas"] == 3);
  CHECK(summary["intervals"]["method"] == "percentile bootstrap over replicas");
  CHECK(summary["intervals"]["exact"] == true);
  CHECK(summary["intervals"]["resamples"] == 10);  // C(5, 3) multisets of 3 replicas
  const auto& impl = summary["results"][0];
  CHECK_FALSE(impl.contains("churn_ci95"));
  for (const char* key :
       {"churn_ci95_replicas", "l2_ci95_replicas", "accuracy_std_ci95_replicas", "per_class_std_max_ci95_replicas"}) {
    INFO(key);
    REQUIRE(impl.contains(key));
    CHECK(impl[key].size() == 2);
  }
  CHECK(impl["churn_ci95_replicas"][0] == groups[0].churn.ci_low);
  CHECK(impl["l2_ci95_replicas"][1] == groups[0].l2.ci_high);

  for (const char* report : {"report.md", "report.html"}) {
    INFO(report);
    const auto text = read_text(out + "/" + report);
    for (const char* expect : {"Per class", "Trouser", "Ankle boot", "per_class.csv", "pairs.csv", "replicas.csv",
                               "summary.json", "9.9.9 (git test)", "bootstrap over replicas", "model mlp (hidden 16)",
                               "training subset 600", "L2:", "Churn:"})
      CHECK_THAT(text, Catch::Contains(expect));
  }
  const auto html = read_text(out + "/report.html");
  CHECK_THAT(html, Catch::Contains("fplab run &#39;tiny experiment.toml&#39; --out x"));  // escaped, not raw
  CHECK_THAT(html, Catch::Contains("<a href='per_class.csv'>"));
  CHECK_THAT(read_text(out + "/per_class.csv"), Catch::Contains("accuracy_std_ci95_replicas_low"));

  if (!fplab::util::program_on_path("gnuplot")) {
    WARN("SKIPPED figure checks: gnuplot is not installed");
    return;
  }
  for (const char* figure : {"churn", "accuracy_std", "per_class_std"})
    for (const char* ext : {".png", ".svg", ".pdf"}) {
      const auto path = out + "/figures/" + figure + ext;
      INFO(path);
      CHECK(fs::exists(path));
      CHECK(fs::file_size(path) > 1000);
      CHECK_THAT(html, Catch::Contains(std::string("figures/") + figure + ext));
    }
}

}  // namespace

TEST_CASE("experiment config: errors name the file, the line and the key") {
  struct Case {
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {"name = \"x\"\n[run]\nprofiles = [\"v100\"]\nreplicaz = 3\n", ":4: key 'run.replicaz': unknown key"},
      {"name = \"x\"\n[run]\nprofiles = [\"v100\"]\nvariants = [\"impl\", \"nope\"]\n",
       ":4: key 'run.variants': unknown variant 'nope'"},
      {"name = \"x\"\n[training]\nepochs = \"three\"\n[run]\nprofiles = [\"v100\"]\n",
       ":3: key 'training.epochs': must be a whole number"},
      {"name = \"x\"\n[run]\nprofiles = [\"v100\"]\nreplicas = 1\n",
       ":4: key 'run.replicas': must be a whole number from 2"},
      {"name = \"x\"\n[training]\nlr = nan\n[run]\nprofiles = [\"v100\"]\n",
       ":3: key 'training.lr': must be a number greater than 0"},
      {"name = \"x\"\n[data]\naugment_pad = 4294967297\n[run]\nprofiles = [\"v100\"]\n",
       ":3: key 'data.augment_pad': must be a whole number"},
      {"name = \"x\"\n[data]\nimbalance_class = 260\n[run]\nprofiles = [\"v100\"]\n", ":3: key 'data.imbalance_class'"},
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

TEST_CASE(
    "runner: Control replicas are bit-identical (churn 0, L2 0); IMPL under atomics is not; resume and ranks agree") {
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
  const auto groups = summarize(experiment, records, data().test.labels, data().class_names.size());
  const auto& impl = groups[0];
  const auto& control = groups[1];
  CHECK(control.identical);
  CHECK(control.churn.mean == 0);
  CHECK(control.l2.mean == 0);
  CHECK(control.accuracy_sd.sd == 0);
  CHECK_FALSE(impl.identical);
  CHECK(impl.l2.mean > 0);
  const auto json = summary_json(experiment, groups, kProvenance).dump();

  // Resume: drop one replica's file; the others are reused, the summary does not change.
  fs::remove(out + "/replicas/synthetic.impl.1.ckpt");
  o.resume = true;
  const auto resumed = run_experiment(experiment, data(), synthetic, o);
  CHECK(summary_json(experiment, summarize(experiment, resumed, data().test.labels, data().class_names.size()), kProvenance).dump() == json);
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
  CHECK(summary_json(experiment, summarize(experiment, collected, data().test.labels, data().class_names.size()), kProvenance).dump() == json);

  write_results(experiment, records, groups, data().class_names, out, kProvenance);
  for (const char* f : {"summary.json", "replicas.csv", "per_class.csv", "pairs.csv", "report.md", "report.html"})
    CHECK(fs::exists(out + "/" + f));
  check_written_results(out, groups);
  fs::remove_all(out);
  fs::remove_all(split);
  fs::remove(path);
}

TEST_CASE("report.md shows a recipe's own text as text: no markup, no lines of its own") {
  ReportDocument d;
  d.title = "# mine <b>bold</b>\n## injected heading";
  d.paragraph("a | b *c* _d_ [link](http://x) `code` ~~e~~ \\ !x\n\n- a list item", "Lead <i>:");
  d.table({"profile"}, {{"h100 | extra cell"}});
  d.code("fplab run x.toml\n```\nnot code any more");
  const std::string md = to_markdown(d);
  INFO(md);
  // Every line is the renderer's structure: the title, the paragraph, the table rows, the fences.
  CHECK_THAT(md, Catch::StartsWith("# \\# mine \\<b\\>bold\\</b\\> \\#\\# injected heading\n\n"));
  CHECK_THAT(md, Catch::Contains("**Lead \\<i\\>:** a \\| b \\*c\\* \\_d\\_ \\[link\\](http://x) \\`code\\` "
                                 "\\~\\~e\\~\\~ \\\\ \\!x  - a list item\n\n"));
  CHECK_THAT(md, Catch::Contains("| h100 \\| extra cell |\n"));
  // The code block's fence is longer than the text's own run of backticks, so the text stays inside.
  CHECK_THAT(md, Catch::Contains("````\nfplab run x.toml\n```\nnot code any more\n````\n"));
  CHECK_THAT(md, !Catch::Contains("\n## injected"));
  CHECK_THAT(md, !Catch::Contains("\n- a list item"));
}
