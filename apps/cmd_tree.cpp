// fplab tree: the reduction tree of a schedule, as Graphviz DOT or SVG.
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "util/whole_file.hpp"
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
  size_t max_nodes = 4000;  // dot lays out 4000 in 2-3 s, 8000 in 10 s (measured: docs/schedules.md)
  bool json = false;
};

void write_svg(const std::string& dot, const std::string& path) {
  util::render_to(path, {"dot",
                         {"-Tsvg", "tree.dot", "-o", "tree.svg"},
                         {{"tree.dot", dot}},
                         "tree.svg",
                         "scripts/setup installs the graphviz package"});
}

// "15 additions, 5 fused operations (accumulator + N terms, one rounding each), depth 5"
std::string counts_text(const sim::ScheduleTree& tree) {
  std::string text = std::to_string(tree.additions) + (tree.additions == 1 ? " addition" : " additions");
  if (tree.fused_operations > 0)
    text += ", " + std::to_string(tree.fused_operations) + " fused operation" +
            (tree.fused_operations == 1 ? "" : "s") + " (accumulator + N terms, one rounding each)";
  if (tree.whole_group_nodes > 0)
    text += ", " + std::to_string(tree.whole_group_nodes) + " whole-group reduction" +
            (tree.whole_group_nodes == 1 ? "" : "s") + " (kahan, neumaier, exact or binned: one node each)";
  return text + ", depth " + std::to_string(tree.depth);
}

int run_tree(const TreeArgs& args) {
  if (args.n < 1 || args.n > 100000) throw UsageError("--n must be from 1 to 100000 (a drawing of more is unreadable)");
  const sim::Schedule schedule = sim::parse_schedule(args.schedule);
  const bool drawing = !args.json || !args.dot_file.empty() || !args.svg_file.empty();
  if (drawing) {
    // Graphviz's layout time grows much faster than the node count: refuse before it runs for
    // minutes (--n 100000 ran for 7), and before printing DOT nobody can lay out.
    const size_t nodes = sim::schedule_tree_nodes(schedule, args.n, {args.impl_seed});
    if (nodes > args.max_nodes)
      throw UsageError(
          "the tree of " + std::to_string(args.n) + " terms has " + std::to_string(nodes) +
          " nodes, more than --max-nodes " + std::to_string(args.max_nodes) +
          " (Graphviz would take minutes): use a smaller --n, raise --max-nodes, or --json for the counts");
  }
  const sim::ScheduleTree tree = sim::draw_schedule(schedule, args.n, {args.impl_seed});
  if (!args.dot_file.empty()) util::write_file_atomically(args.dot_file, tree.dot);
  if (!args.svg_file.empty()) write_svg(tree.dot, args.svg_file);
  if (args.json) {
    print_json({{"schedule", sim::to_string(schedule)},
                {"n", args.n},
                {"nodes", tree.nodes},
                {"additions", tree.additions},
                {"fused_operations", tree.fused_operations},
                {"whole_group_reductions", tree.whole_group_nodes},
                {"depth", tree.depth},
                {"nondeterministic", schedule.nondeterministic()}});
  } else if (args.dot_file.empty() && args.svg_file.empty()) {
    std::cout << tree.dot;
  } else {
    std::printf("%s  (K=%zu): %s\n", sim::to_string(schedule).c_str(), args.n, counts_text(tree).c_str());
  }
  return 0;
}

}  // namespace

void add_tree_command(CLI::App& app, Runner& run) {
  auto args = std::make_shared<TreeArgs>();
  CLI::App* cmd = app.add_subcommand("tree", "Draw the reduction tree of a schedule (Graphviz)");
  cmd->add_option("-s,--schedule", args->schedule, "schedule text or preset")->required();
  cmd->add_option("-n,--n", args->n, "number of terms K")->capture_default_str()->check(whole_number());
  cmd->add_option("--dot", args->dot_file, "write Graphviz DOT to this file");
  cmd->add_option("--svg", args->svg_file, "write an SVG picture to this file (needs graphviz)");
  cmd->add_option("--impl-seed", args->impl_seed, "which random order atomic/shuffle steps show")
      ->capture_default_str()
      ->check(whole_number());
  cmd->add_option("--max-nodes", args->max_nodes, "refuse to draw trees with more nodes (Graphviz would take minutes)")
      ->capture_default_str()
      ->check(whole_number());
  cmd->add_flag("--json", args->json,
                "print JSON: canonical schedule, nodes, additions, fused operations, whole-group reductions, depth");
  cmd->footer(
      "Examples:\n"
      "  fplab tree --schedule 'contig(4):seq | all:shfl_down' --n 16 --svg tree.svg\n"
      "  fplab tree --schedule numpy --n 24 --dot numpy.dot\n"
      "  fplab tree --schedule tc-h100-fp16 --n 40 --svg tc.svg    # tensor cores: fused steps of 16 terms\n"
      "  fplab tree --schedule 'cuda-naive-sum(64,2)' --n 256 --json");
  cmd->callback([&run, args] { run = [args] { return run_tree(*args); }; });
}

}  // namespace fplab::app
