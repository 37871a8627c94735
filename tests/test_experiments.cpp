// Experiment configs, the runner and the summaries: parse errors that name file, line and key;
// Control replicas bit-identical (churn exactly 0); IMPL under atomics not; resume reuses
// finished replicas; two "ranks" sharing a folder give the single-process summary.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include "experiments/report.hpp"
#include "experiments/report_document.hpp"
#include "experiments/runner.hpp"
#include "util/external_program.hpp"

using namespace fplab;
using namespace fplab::experiments;
namespace fs = std::filesystem;

namespace {

// The ranks of a distributed run as threads of this process, meeting as MPI ranks would: each
// collective returns once every rank has called it.
class ThreadRanks {
 public:
  explicit ThreadRanks(int ranks)
      : ranks_(ranks), flags_(static_cast<size_t>(ranks)), bytes_(static_cast<size_t>(ranks)) {}
  class Rank final : public ReplicaExchange {
   public:
    Rank(ThreadRanks& all, int rank) : all_(all), rank_(rank) {}
    int rank() const override { return rank_; }
    int ranks() const override { return all_.ranks_; }
    int first_failed(bool failed) override {
      all_.flags_[static_cast<size_t>(rank_)] = failed;
      all_.wait_for_all();
      int first = -1;
      for (int r = all_.ranks_ - 1; r >= 0; --r)
        if (all_.flags_[static_cast<size_t>(r)]) first = r;
      all_.wait_for_all();  // nobody writes a flag again before all have read them
      return first;
    }
    std::vector<std::vector<uint8_t>> gather(const std::vector<uint8_t>& mine) override {
      all_.bytes_[static_cast<size_t>(rank_)] = mine;
      all_.wait_for_all();
      auto out = rank_ == 0 ? all_.bytes_ : std::vector<std::vector<uint8_t>>{};
      all_.wait_for_all();
      return out;
    }

   private:
    ThreadRanks& all_;
    int rank_;
  };

 private:
  void wait_for_all() {
    std::unique_lock lock(mutex_);
    const size_t round = round_;
    if (++arrived_ == ranks_) {
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return round_ != round; });
    }
  }
  int ranks_, arrived_ = 0;
  size_t round_ = 0;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<char> flags_;
  std::vector<std::vector<uint8_t>> bytes_;
};

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
  CHECK(summary_json(experiment, summarize(experiment, resumed, data().test.labels, data().class_names.size()),
                     kProvenance)
            .dump() == json);
  CHECK(fs::exists(out + "/replicas/synthetic.impl.1.ckpt"));

  // Two ranks, each in a folder of its own: rank 1 trains its share and sends it; rank 0 ends
  // with every replica (in its folder too) and the single process's summary.
  const std::string split = out + "_ranks";
  fs::remove_all(split);
  fs::remove_all(split + "1");
  {
    ThreadRanks two(2);
    ThreadRanks::Rank rank0(two, 0), rank1(two, 1);
    RunOptions r0 = o, r1 = o;
    r0.resume = r1.resume = false;
    r0.out_dir = split;
    r1.out_dir = split + "1";
    r0.exchange = &rank0;
    r1.exchange = &rank1;
    std::vector<ReplicaRecord> own1;
    std::thread second([&] { own1 = run_experiment(experiment, data(), synthetic, r1); });
    const auto collected = run_experiment(experiment, data(), synthetic, r0);
    second.join();
    CHECK(own1.size() == 3);
    CHECK(summary_json(experiment, summarize(experiment, collected, data().test.labels, data().class_names.size()),
                       kProvenance)
              .dump() == json);
    CHECK(fs::exists(split + "/replicas/synthetic.impl.1.ckpt"));         // rank 1's, kept by rank 0
    CHECK_FALSE(fs::exists(split + "1/replicas/synthetic.impl.0.ckpt"));  // rank 0's never reach rank 1
  }
  // A rank that fails stops the other too, with a line naming it (not a wait for ever).
  {
    ThreadRanks two(2);
    ThreadRanks::Rank rank0(two, 0), rank1(two, 1);
    RunOptions r0 = o, r1 = o;
    r0.resume = r1.resume = false;
    r0.out_dir = split + "_fail0";
    r1.out_dir = "/proc/fplab-cannot-write-here";
    r0.exchange = &rank0;
    r1.exchange = &rank1;
    std::string error1, error0;
    std::thread second([&] {
      try {
        run_experiment(experiment, data(), synthetic, r1);
      } catch (const std::exception& e) {
        error1 = e.what();
      }
    });
    try {
      run_experiment(experiment, data(), synthetic, r0);
    } catch (const std::exception& e) {
      error0 = e.what();
    }
    second.join();
    CHECK_FALSE(error1.empty());
    CHECK(error0 == "rank 1 of the run failed (its error is above)");
    fs::remove_all(split + "_fail0");
  }

  write_results(experiment, records, groups, data().class_names, out, kProvenance);
  for (const char* f : {"summary.json", "replicas.csv", "per_class.csv", "pairs.csv", "report.md", "report.html"})
    CHECK(fs::exists(out + "/" + f));
  check_written_results(out, groups);
  fs::remove_all(out);
  fs::remove_all(split);
  fs::remove_all(split + "1");
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
