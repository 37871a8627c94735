// fplab run: an experiment (TOML) of variants x replicas x profiles, with metrics and a report.
#include <cstdio>
#include <filesystem>
#include <thread>

#include "fp/format.hpp"

#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "experiments/report.hpp"
#include "experiments/runner.hpp"
#include "models/hw_profile.hpp"

namespace fplab::app {
namespace {

struct RunArgs {
  std::string file, out, data_dir = models::kFashionMnistDir, profiles_dir;
  size_t jobs = 0;
  bool resume = false, json = false, quiet = false;
  std::vector<std::string> argv;
};

// Every op of a table in `format` ("exact": every reduction exact, in fp32).
models::OpTable in_format(models::OpTable table, const std::string& format) {
  if (format.empty()) return table;
  if (format == "exact") return models::op_table_preset("exact");
  for (auto& op : table.ops) op.arithmetic.format = fp::parse_format(format);
  return table;
}

int run_run(const RunArgs& args) {
  const auto experiment = experiments::load_experiment(args.file);
  experiments::RunOptions options;
  options.out_dir = args.out.empty() ? "results/" + experiment.name : args.out;
  options.jobs = args.jobs ? args.jobs : std::max(1u, std::thread::hardware_concurrency());
  options.resume = args.resume;
  options.quiet = args.quiet || args.json;
  std::tie(options.rank, options.ranks) = experiments::launcher_rank();
  const std::string format = experiment.format == "fp32" ? "" : experiment.format;
  auto resolve = [&](const std::string& name) {
    const auto profile = models::find_hw_profile(name, args.profiles_dir);
    return std::pair{in_format(profile.default_ops, format), in_format(profile.deterministic_ops, format)};
  };
  for (const auto& p : experiment.profiles) resolve(p);  // fail early on a bad profile
  const auto data = models::load_fashion_mnist(args.data_dir);
  if (!options.quiet)
    std::fprintf(stderr, "%s: %zu profile(s) x %zu variant(s) x %zu replicas on %zu thread(s)%s -> %s\n",
                 experiment.name.c_str(), experiment.profiles.size(), experiment.variants.size(), experiment.replicas,
                 options.jobs, options.ranks > 1 ? (", rank " + std::to_string(options.rank) + " of " + std::to_string(options.ranks)).c_str() : "",
                 options.out_dir.c_str());
  const auto records = experiments::run_experiment(experiment, data, resolve, options);
  if (options.rank != 0) return 0;  // rank 0 writes the one report
  const auto groups = experiments::summarize(experiment, records, data.test.labels);
  std::string command = "fplab";
  for (const auto& a : args.argv) command += " " + a;
  experiments::write_results(experiment, records, groups, data.class_names, options.out_dir, command);
  if (args.json) print_json(experiments::summary_json(experiment, groups));
  else std::printf("%s\nresults in %s/ (report.md, report.html, summary.json, *.csv, figures/)\n",
                   experiments::summary_table(groups).c_str(), options.out_dir.c_str());
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, Runner& run, int argc, char** argv) {
  auto a = std::make_shared<RunArgs>();
  for (int i = 1; i < argc; ++i) a->argv.emplace_back(argv[i]);
  CLI::App* cmd = app.add_subcommand("run", "Run an experiment: noise variants x replicas x hardware profiles");
  cmd->add_option("file", a->file, "experiment TOML (see experiments/ and docs/experiments.md)")->required();
  cmd->add_option("--out", a->out, "output folder (default results/NAME)");
  cmd->add_option("--jobs", a->jobs, "replicas trained at once (default: all cores)");
  cmd->add_flag("--resume", a->resume, "keep the replicas an earlier (killed) run finished");
  cmd->add_option("--data-dir", a->data_dir, "folder with the Fashion-MNIST IDX files")->capture_default_str();
  cmd->add_option("--profiles-dir", a->profiles_dir, "folder of hardware profiles (default: the project's hw_profiles/)");
  cmd->add_flag("--quiet", a->quiet, "no progress on stderr");
  cmd->add_flag("--json", a->json, "print summary.json");
  cmd->footer(
      "Examples:\n"
      "  fplab run experiments/quick.toml\n"
      "  fplab run experiments/noise_sources_mlp.toml --jobs 2 --out results/fig2\n"
      "  fplab run experiments/hardware.toml --resume    # continue a killed run\n"
      "  mpirun -n 4 fplab run experiments/noise_sources_mlp.toml    # replicas split over ranks");
  cmd->callback([&run, a] { run = [a] { return run_run(*a); }; });
}

}  // namespace fplab::app
