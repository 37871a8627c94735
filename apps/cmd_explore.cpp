// fplab explore: how the result of one reduction varies over implementation seeds (runs of the
// same nondeterministic hardware), against the exact value and the error bound.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "apps/arithmetic_options.hpp"
#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "models/checkpoint_io.hpp"
#include "apps/judge.hpp"
#include "fp/number_text.hpp"
#include "sim/engine.hpp"
#include "sim/schedule_tree.hpp"
#include "util/gnuplot_figure.hpp"
#include "util/progress.hpp"

namespace fplab::app {
namespace {

struct ExploreArgs {
  std::string schedule;
  ArithmeticArgs arithmetic;
  DataArgs data;
  int trials = 100;
  std::string plot;
  bool json = false;
};

void plot_histogram(const std::map<double, int>& counts, const Judge& judge, const std::string& title,
                    const std::string& path) {
  std::string data;
  for (const auto& [value, count] : counts)
    data += std::to_string(judge.ulps(value)) + " " + std::to_string(count) + "\n";
  util::render_gnuplot(path,
                       "set title " + util::gnuplot_quoted(title) +
                           " noenhanced\n"
                           "set xlabel 'error of the result, in ulps of the exact sum'\n"
                           "set ylabel 'implementation seeds'\nset key off\n"
                           "set arrow from 0, graph 0 to 0, graph 1 nohead lc rgb 'red'\n"
                           "plot 'data.dat' using 1:2 with impulses lw 4\n",
                       data, 900, 500);
}

int run_explore(const ExploreArgs& args) {
  if (args.trials < 1 || args.trials > 1000000) throw UsageError("--trials must be from 1 to 1000000");
  const sim::Schedule schedule = sim::parse_schedule(args.schedule);
  const sim::Arithmetic arithmetic = args.arithmetic.parse();
  int rounded = 0;
  const auto terms = args.data.load(arithmetic.format, rounded);
  const Judge judge(terms, arithmetic.format, arithmetic.mode);
  const size_t depth = sim::schedule_depth(schedule, terms.size());
  const double bound = error_bound(depth, unit_roundoff(arithmetic.format, arithmetic.mode), judge.sum_of_magnitudes());

  std::map<double, int> counts;
  util::Progress progress;
  for (int seed = 0; seed < args.trials; ++seed) {
    ++counts[sim::reduce(schedule, terms, arithmetic, {static_cast<uint64_t>(seed)})];
    progress.update("  " + std::to_string(seed + 1) + " / " + std::to_string(args.trials) + " seeds");
  }
  progress.finish();
  const double lo = counts.begin()->first, hi = counts.rbegin()->first;
  const std::string canonical = sim::to_string(schedule);
  if (!args.plot.empty()) plot_histogram(counts, judge, canonical + "  (" + arithmetic.to_string() + ")", args.plot);

  nlohmann::json histogram = nlohmann::json::array();
  for (const auto& [value, count] : counts)
    histogram.push_back({{"value", json_number(value)}, {"ulps", json_number(judge.ulps(value))}, {"count", count}});
  if (args.json) {
    nlohmann::json out = {{"schedule", canonical},
                          {"arithmetic", arithmetic.to_string()},
                          {"terms", terms.size()},
                          {"trials", args.trials},
                          {"nondeterministic", schedule.nondeterministic()},
                          {"distinct", counts.size()},
                          {"min", json_number(lo)},
                          {"max", json_number(hi)},
                          {"spread_ulps", json_number((hi - lo) / judge.ulp())},
                          {"depth", depth},
                          {"error_bound", json_number(bound)},
                          {"error_bound_ulps", json_number(bound / judge.ulp())},
                          {"histogram", histogram}};
    add_exact_fields(out, judge);
    print_json(out);
    return 0;
  }
  std::printf("schedule    %s\narithmetic  %s\nterms       %zu, reduction depth %zu\n", canonical.c_str(),
              arithmetic.to_string().c_str(), terms.size(), depth);
  print_exact_lines(judge, arithmetic.format, "", 11);
  std::printf("%d implementation seeds gave %zu distinct results, spread %.3g ulps:\n", args.trials, counts.size(),
              (hi - lo) / judge.ulp());
  if (!schedule.nondeterministic())
    std::printf("  (this schedule has no atomic or shuffle step: every seed gives the same order)\n");
  int widest = 0;
  for (const auto& [v, c] : counts) widest = std::max(widest, c);
  size_t shown = 0;
  for (const auto& [value, count] : counts) {
    if (++shown > 25) {
      std::printf("    ... %zu more (see --json)\n", counts.size() - 25);
      break;
    }
    std::printf("    %-24s %-22s %7d %s\n", fp::format_double(value).c_str(), error_text(judge, value).c_str(), count,
                std::string(std::max(1, 40 * count / widest), '#').c_str());
  }
  std::printf("error bound for depth %zu: |error| <= %.4g (%.4g ulps)\n", depth, bound, bound / judge.ulp());
  if (!args.plot.empty()) std::printf("histogram written to %s\n", args.plot.c_str());
  return 0;
}

}  // namespace

void add_explore_command(CLI::App& app, Runner& run) {
  auto args = std::make_shared<ExploreArgs>();
  CLI::App* cmd = app.add_subcommand("explore", "Distribution of a reduction's result over implementation seeds");
  cmd->add_option("-s,--schedule", args->schedule, "schedule text or preset")->required();
  add_arithmetic_options(cmd, args->arithmetic);
  add_data_options(cmd, args->data);
  cmd->add_option("--trials", args->trials, "number of implementation seeds (runs)")->capture_default_str();
  cmd->add_option("--plot", args->plot, "write a histogram (PNG, gnuplot) to this file");
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->footer(
      "Examples:\n"
      "  fplab explore --schedule 'cuda-naive-sum(256,64)' --gen cancel:100000 --trials 200\n"
      "  fplab explore --schedule 'splitk-atomic(16)' --gen lognormal:4096 --trials 1000 --plot spread.png");
  cmd->callback([&run, args] { run = [args] { return run_explore(*args); }; });
}

}  // namespace fplab::app
