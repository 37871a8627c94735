// fplab tree: the reduction tree of a schedule, as Graphviz DOT or SVG.
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "models/checkpoint_io.hpp"
#include "sim/schedule.hpp"
#include "sim/schedule_tree.hpp"
#include "util/rendered_file.hpp"

namespace fplab::app {
namespace {

struct TreeArgs {
  std::string schedule;
  size_t n = 16;
  std::string dot_file, svg_file;
  uint64_t impl_seed = 0;
  bool json = false;
};

void write_svg(const std::string& dot, const std::string& path) {
  util::render_to(path, {"dot", {"-Tsvg", "tree.dot", "-o", "tree.svg"}, {{"tree.dot", dot}}, "tree.svg",
                         "scripts/setup installs the graphviz package"});
}

int run_tree(const TreeArgs& args) {
  if (args.n < 1 || args.n > 100000) throw UsageError("--n must be from 1 to 100000 (a drawing of more is unreadable)");
  const sim::Schedule schedule = sim::parse_schedule(args.schedule);
  const sim::ScheduleTree tree = sim::draw_schedule(schedule, args.n, {args.impl_seed});
  if (!args.dot_file.empty()) models::write_file_atomically(args.dot_file, tree.dot);
  if (!args.svg_file.empty()) write_svg(tree.dot, args.svg_file);
  if (args.json) {
    print_json({{"schedule", sim::to_string(schedule)},
                {"n", args.n},
                {"additions", tree.additions},
                {"depth", tree.depth},
                {"nondeterministic", schedule.nondeterministic()}});
  } else if (args.dot_file.empty() && args.svg_file.empty()) {
    std::cout << tree.dot;
  } else {
    std::printf("%s  (K=%zu): %zu additions, depth %zu\n", sim::to_string(schedule).c_str(), args.n, tree.additions,
                tree.depth);
  }
  return 0;
}

}  // namespace

void add_tree_command(CLI::App& app, Runner& run) {
  auto args = std::make_shared<TreeArgs>();
  CLI::App* cmd = app.add_subcommand("tree", "Draw the reduction tree of a schedule (Graphviz)");
  cmd->add_option("-s,--schedule", args->schedule, "schedule text or preset")->required();
  cmd->add_option("-n,--n", args->n, "number of terms K")->capture_default_str();
  cmd->add_option("--dot", args->dot_file, "write Graphviz DOT to this file");
  cmd->add_option("--svg", args->svg_file, "write an SVG picture to this file (needs graphviz)");
  cmd->add_option("--impl-seed", args->impl_seed, "which random order atomic/shuffle steps show")->capture_default_str();
  cmd->add_flag("--json", args->json, "print JSON: canonical schedule, additions, depth");
  cmd->footer(
      "Examples:\n"
      "  fplab tree --schedule 'contig(4):seq | all:shfl_down' --n 16 --svg tree.svg\n"
      "  fplab tree --schedule numpy --n 24 --dot numpy.dot\n"
      "  fplab tree --schedule 'cuda-naive-sum(64,2)' --n 256 --json");
  cmd->callback([&run, args] { run = [args] { return run_tree(*args); }; });
}

}  // namespace fplab::app
