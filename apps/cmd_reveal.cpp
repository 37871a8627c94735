// fplab reveal: the order in which a real library function adds its inputs, found by probing it
// (reveal/probe_sum.hpp), matched to a schedule, and replayed bit for bit (--verify).
#include <cstdio>
#include <iostream>

#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "reveal/match_schedule.hpp"
#include "reveal/probe_sum.hpp"
#include "reveal/replay_sum.hpp"
#include "reveal/shared_function.hpp"
#include "sim/schedule.hpp"
#include "util/whole_file.hpp"

namespace fplab::app {
namespace {

struct RevealArgs {
  std::string library, symbol, dot_file, json_file;
  size_t n = 16;
  bool dot_product = false;
  size_t verify = 0;
  uint64_t seed = 1;
  bool json = false;
};

int run_reveal(const RevealArgs& args) {
  if (args.n < 2 || args.n > 65536) throw UsageError("--n must be from 2 to 65536");
  if (args.verify > 1000000) throw UsageError("--verify must be at most 1000000 trials");
  const reveal::SharedFunction function(args.library, args.symbol);
  const reveal::SumFunction sum = args.dot_product ? reveal::dot_with_ones(function.as_dot()) : function.as_sum();
  const reveal::RevealedSum revealed = reveal::reveal_sum(sum, args.n);
  const reveal::ScheduleMatch match = reveal::match_schedule(revealed.tree);
  const sim::AdditionTree& tree = revealed.tree;
  std::optional<reveal::Verification> verified;
  if (args.verify > 0)
    verified = args.dot_product ? reveal::verify_dot(function.as_dot(), revealed.tree, args.verify, args.seed)
                                : reveal::verify_sum(function.as_sum(), revealed.tree, args.verify, args.seed);
  if (!args.dot_file.empty()) util::write_file_atomically(args.dot_file, revealed.tree.dot());

  nlohmann::json doc = {{"library", args.library},
                        {"symbol", args.symbol},
                        {"form", args.dot_product ? "dot" : "sum"},
                        {"n", args.n},
                        {"calls", revealed.calls},
                        {"seconds", revealed.seconds},
                        {"tree", revealed.tree.text()},
                        {"additions", tree.additions()},
                        {"multi_term_nodes", tree.multi_term_nodes()},
                        {"depth", tree.depth()},
                        {"schedules", match.schedules},
                        {"schedules_compared", match.candidates}};
  if (verified) {
    nlohmann::json scores = nlohmann::json::array();
    for (const auto& s : verified->scores)
      scores.push_back({{"arithmetic", reveal::arithmetic_name(s.arithmetic)}, {"identical", s.identical}});
    doc["verify"] = {{"trials", verified->trials}, {"seed", args.seed}, {"inputs", verified->inputs},
                     {"replays", scores}};
  }
  if (!args.json_file.empty()) util::write_file_atomically(args.json_file, doc.dump(2) + "\n");
  if (args.json) {
    print_json(doc);
    return 0;
  }
  std::printf("%s in %s, n = %zu (%s): %zu additions%s, depth %zu; %zu calls in %.3f s\n", args.symbol.c_str(),
              args.library.c_str(), args.n, args.dot_product ? "dot product" : "sum", tree.additions(),
              tree.multi_term_nodes()
                  ? (", " + std::to_string(tree.multi_term_nodes()) + " nodes of more than two terms").c_str()
                  : "",
              tree.depth(), revealed.calls, revealed.seconds);
  const std::string text = revealed.tree.text();
  if (text.size() <= 2000)
    std::printf("tree: %s\n", text.c_str());
  else
    std::printf("tree: %zu characters (--json or --json-out has it whole; --tree-dot draws it)\n", text.size());
  if (!match.schedules.empty()) {
    std::printf("schedule: %s\n", match.schedules[0].c_str());
    for (size_t k = 1; k < match.schedules.size(); ++k) std::printf("     also: %s\n", match.schedules[k].c_str());
  } else
    std::printf("schedule: none of the %zu schedules compared adds in this order\n", match.candidates);
  if (verified) {
    std::string kinds;
    for (const auto& k : verified->inputs) kinds += (kinds.empty() ? "" : "; ") + k;
    std::printf("replayed on %zu random inputs (in turn: %s):\n", verified->trials, kinds.c_str());
    for (const auto& s : verified->scores)
      std::printf("  %zu/%zu bit-identical with %s\n", s.identical, verified->trials,
                  reveal::arithmetic_name(s.arithmetic).c_str());
    if (verified->scores.empty() || verified->scores[0].identical < verified->trials)
      std::printf("no arithmetic replays every trial: the function is not this tree of plain additions (a compensated "
                  "sum, an order that depends on the values, or nondeterminism)\n");
  }
  return 0;
}

}  // namespace

void add_reveal_command(CLI::App& app, Runner& run) {
  auto args = std::make_shared<RevealArgs>();
  CLI::App* cmd = app.add_subcommand("reveal", "Reveal the addition order of a real library function by probing it");
  cmd->add_option("--so", args->library, "the shared library (a path, or a name the dynamic loader finds)")
      ->required();
  cmd->add_option("--symbol", args->symbol,
                  "the C function: float f(const float* x, size_t n), or with --dot "
                  "float f(const float* a, const float* b, size_t n)")
      ->required();
  cmd->add_option("-n,--n", args->n, "number of terms")->capture_default_str()->check(whole_number());
  cmd->add_flag("--dot", args->dot_product, "the function is a dot product (probed with b = 1)");
  cmd->add_option("--verify", args->verify,
                  "replay the revealed tree on this many random inputs and count bit-identical results")
      ->check(whole_number());
  cmd->add_option("--seed", args->seed, "seed of --verify's inputs")->capture_default_str()->check(whole_number());
  cmd->add_option("--tree-dot", args->dot_file, "write the revealed tree as Graphviz DOT to this file");
  cmd->add_option("--json-out", args->json_file, "write the JSON report to this file");
  cmd->add_flag("--json", args->json, "print the JSON report instead of text");
  cmd->footer(
      "The function is loaded into fplab and called about n log2 n times (n - 1 for a sequential sum): load only\n"
      "libraries you trust. Inputs are all 1 but a pair +2^e, -2^e; the result counts the 1s the pair did not\n"
      "absorb (the technique of FPRev, Xie et al., USENIX ATC 2025).\n"
      "Examples:\n"
      "  fplab reveal --so build/tests/libreveal_targets.so --symbol lanes8_sum --n 32 --verify 1000\n"
      "  fplab reveal --so build/tests/libreveal_targets.so --symbol fma_dot --dot --n 16 --verify 200\n"
      "  fplab reveal --so build/tests/libreveal_targets.so --symbol pairwise_sum --n 12 --tree-dot tree.dot");
  cmd->callback([&run, args] { run = [args] { return run_reveal(*args); }; });
}

}  // namespace fplab::app
