// fplab diverge: when and where two replicas of an experiment part ways, step by step.
#include <cmath>
#include <cstdio>

#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "fp/number_text.hpp"
#include "experiments/divergence.hpp"
#include "experiments/experiment.hpp"
#include "util/whole_file.hpp"
#include "profiles/hw_profile.hpp"
#include "util/gnuplot_figure.hpp"
#include "util/progress.hpp"

namespace fplab::app {
namespace {

struct DivergeArgs {
  std::string file, profile, variant = "impl", csv, plot, data_dir = models::kFashionMnistDir;
  std::vector<std::string> profiles_dir;
  std::vector<size_t> pair = {0, 1};
  bool json = false, quiet = false;
};

int run_diverge(const DivergeArgs& args) {
  const auto x = experiments::load_experiment(args.file);
  const std::string profile_name = args.profile.empty() ? x.profiles.front() : args.profile;
  const auto profile = profiles::find_hw_profile(profile_name, args.profiles_dir);
  const auto variant = experiments::parse_variant(args.variant);
  if (args.pair.size() != 2 || args.pair[0] == args.pair[1])
    throw UsageError("--pair needs two different replica numbers");
  for (size_t replica : args.pair)
    if (replica >= x.replicas)
      throw UsageError("--pair: replica " + std::to_string(replica) + " does not exist (" + x.path +
                       " has replicas 0 to " + std::to_string(x.replicas - 1) + ")");
  const auto data = models::load_image_dataset(args.data_dir);
  const auto a = x.replica_config(profile.default_ops, profile.deterministic_ops, variant, args.pair[0]);
  const auto b = x.replica_config(profile.default_ops, profile.deterministic_ops, variant, args.pair[1]);
  util::Progress progress(!args.quiet);
  const auto d = experiments::diverge(a, b, data, [&](const std::string& where) { progress.update(where); });
  progress.finish();

  std::string csv = "step,l2,relative_l2,differing_weights\n";
  for (const auto& p : d.curve)
    csv += std::to_string(p.step) + "," + fp::format_double(p.l2) + "," + fp::format_double(p.relative) + "," +
           std::to_string(p.differing) + "\n";
  if (!args.csv.empty()) util::write_file_atomically(args.csv, csv);
  if (!args.plot.empty()) {
    std::string data_points;
    for (const auto& p : d.curve)
      if (p.relative > 0) data_points += std::to_string(p.step) + " " + fp::format_double(p.relative) + "\n";
    if (data_points.empty()) data_points = "0 1e-30\n";
    const std::string title = x.name + ": " + profile_name + " " + args.variant + ", replicas " +
                              std::to_string(args.pair[0]) + " and " + std::to_string(args.pair[1]);
    util::render_gnuplot(args.plot,
                         "set logscale y\nset format y '10^{%L}'\nset title " + util::gnuplot_quoted(title) +
                             " noenhanced\nset xlabel 'training step'\nset ylabel '||w_a - w_b|| / ||w_a||'\n"
                             "set key off\nplot 'data.dat' using 1:2 with lines lw 2\n",
                         data_points);
  }
  const auto& last = d.curve.back();
  if (args.json) {
    nlohmann::json curve = nlohmann::json::array();
    for (const auto& p : d.curve)
      curve.push_back({{"step", p.step}, {"l2", p.l2}, {"relative_l2", p.relative}, {"differing", p.differing}});
    print_json({{"experiment", x.name},
                {"profile", profile_name},
                {"variant", args.variant},
                {"pair", args.pair},
                {"first_step", d.first_step},
                {"first_layers", d.first_layers},
                {"final_relative_l2", last.relative},
                {"parameters", d.parameters},
                {"curve", curve}});
    return 0;
  }
  std::printf("%s, %s %s, replicas %zu and %zu: %zu steps, %zu weights\n", x.name.c_str(), profile_name.c_str(),
              args.variant.c_str(), args.pair[0], args.pair[1], d.curve.size() - 1, d.parameters);
  if (d.first_step < 0) {
    std::printf("bit-identical after every step\n");
    return 0;
  }
  std::printf("first difference after step %lld, in:\n", static_cast<long long>(d.first_step));
  for (const auto& l : d.first_layers) std::printf("  %s\n", l.c_str());
  std::printf("relative distance ||w_a - w_b|| / ||w_a||:\n");
  const size_t n = d.curve.size();
  for (size_t k = 0; k < 8; ++k) {
    const auto& p = d.curve[std::min(n - 1, k * (n - 1) / 7)];
    std::printf("  step %6llu  %.3e  (%zu of %zu weights differ)\n", static_cast<unsigned long long>(p.step),
                p.relative, p.differing, d.parameters);
  }
  return 0;
}

}  // namespace

void add_diverge_command(CLI::App& app, Runner& run) {
  auto a = std::make_shared<DivergeArgs>();
  CLI::App* cmd = app.add_subcommand("diverge", "When and where two replicas of an experiment part ways, step by step");
  cmd->add_option("file", a->file, "experiment TOML")->required();
  cmd->add_option("--profile", a->profile, "hardware profile (default: the experiment's first)");
  cmd->add_option("--variant", a->variant, "algo+impl, algo, impl, control, order or flip")->capture_default_str();
  cmd->add_option("--pair", a->pair, "the two replica numbers")
      ->capture_default_str()
      ->expected(2)
      ->check(whole_number());
  cmd->add_option("--csv", a->csv, "write the per-step distances (CSV)");
  cmd->add_option("--plot", a->plot, "write a plot of the relative distance per step (PNG)");
  cmd->add_option("--data-dir", a->data_dir, "folder of an IDX image data set: train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (each .gz or not), classes.txt optional (docs/data.md)")->capture_default_str();
  add_profiles_dir_option(cmd, a->profiles_dir);
  cmd->add_flag("--quiet", a->quiet, "no progress on stderr");
  cmd->add_flag("--json", a->json, "print JSON");
  cmd->footer(
      "Examples:\n"
      "  fplab diverge experiments/quick.toml --variant impl --plot divergence.png\n"
      "  fplab diverge experiments/flipped_bit.toml --variant flip --pair 0 1 --csv flip.csv");
  cmd->callback([&run, a] { run = [a] { return run_diverge(*a); }; });
}

}  // namespace fplab::app
