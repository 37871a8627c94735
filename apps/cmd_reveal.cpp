// fplab reveal: the order in which a real library function adds its inputs, found by probing it
// (reveal/probe_sum.hpp), matched to a schedule, and replayed bit for bit (--verify).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <vector>

#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "reveal/match_schedule.hpp"
#include "reveal/probe_sum.hpp"
#include "reveal/probe_varying_sum.hpp"
#include "reveal/replay_schedule.hpp"
#include "reveal/replay_sum.hpp"
#include "reveal/replay_varying_sum.hpp"
#include "reveal/shared_function.hpp"
#include "sim/schedule.hpp"
#include "util/whole_file.hpp"

namespace fplab::app {
namespace {

struct RevealArgs {
  std::string library, symbol, dot_file, json_file;
  size_t n = 16;
  bool dot_product = false;
  std::string signature;                   // sum, dot, cblas_sdot, cblas_sgemm ("": from --dot)
  std::vector<size_t> gemm_shape{64, 64};  // cblas_sgemm's rows and columns
  size_t verify = 0, runs = 0;
  uint64_t seed = 1;
  bool json = false;
};

// The dot product the symbol computes, by its signature.
reveal::DotFunction dot_of(const RevealArgs& args, const reveal::SharedFunction& function) {
  if (args.signature == "cblas_sdot") return function.as_cblas_sdot();
  if (args.signature == "cblas_sgemm") return function.as_cblas_sgemm(args.gemm_shape[0], args.gemm_shape[1]);
  return function.as_dot();
}

// --runs: an order that may vary from call to call; the skeleton, its parts and how they met.
int run_reveal_varying(const RevealArgs& args, const reveal::SharedFunction& function, const reveal::SumFunction& sum) {
  const reveal::RevealedVaryingSum revealed = reveal::reveal_varying_sum(sum, args.n, args.runs);
  const reveal::ScheduleMatch match = reveal::match_varying_schedule(revealed);
  std::optional<reveal::VaryingVerification> verified;
  if (args.verify > 0 && revealed.varies)
    verified = args.dot_product ? reveal::verify_varying_dot(dot_of(args, function), revealed, args.verify, args.seed)
                                : reveal::verify_varying_sum(function.as_sum(), revealed, args.verify, args.seed);
  if (!args.dot_file.empty()) util::write_file_atomically(args.dot_file, revealed.skeleton.dot());
  nlohmann::json cross = nlohmann::json::object(), met = nlohmann::json::object();
  for (const auto& [size, calls] : revealed.cross_meets) cross[std::to_string(size)] = calls;
  for (const auto& [k, calls] : revealed.parts_met) met[std::to_string(k)] = calls;
  nlohmann::json doc = {{"library", args.library},
                        {"symbol", args.symbol},
                        {"form", args.dot_product ? "dot" : "sum"},
                        {"signature", args.signature},
                        {"n", args.n},
                        {"runs", revealed.runs},
                        {"calls", revealed.calls},
                        {"seconds", revealed.seconds},
                        {"varies", revealed.varies},
                        {"parts", revealed.parts},
                        {"skeleton", revealed.skeleton.text()},
                        {"schedules", match.schedules},
                        {"schedules_compared", match.candidates},
                        {"cross_meets", cross},
                        {"chain_of_parts", revealed.chain_of_parts},
                        {"parts_met", met},
                        {"uniform_order_distance", revealed.uniform_order_distance}};
  if (verified) {
    nlohmann::json scores = nlohmann::json::array();
    for (const auto& sc : verified->scores)
      scores.push_back({{"arithmetic", reveal::arithmetic_name(sc.arithmetic)}, {"identical", sc.identical}});
    doc["verify"] = {{"trials", verified->trials},
                     {"seed", args.seed},
                     {"inputs", verified->inputs},
                     {"replays", scores},
                     {"orders_per_trial", verified->orders},
                     {"every_order", verified->every_order},
                     {"distinct_results", verified->distinct_results}};
  }
  if (!args.json_file.empty()) util::write_file_atomically(args.json_file, doc.dump(2) + "\n");
  if (args.json) {
    print_json(doc);
    return 0;
  }
  std::printf("%s in %s, n = %zu (%s), pairs in a part asked %zu times: %zu calls in %.3f s\n", args.symbol.c_str(),
              args.library.c_str(), args.n, args.dot_product ? "dot product" : "sum", revealed.runs, revealed.calls,
              revealed.seconds);
  if (!revealed.varies) {
    std::printf("the order did not vary: one tree (%s)\n",
                match.schedules.empty() ? "no schedule matches" : match.schedules[0].c_str());
    return 0;
  }
  std::printf("the order varies: %zu deterministic parts (%zu to %zu terms), combined in an order that changes\n",
              revealed.parts.size(),
              std::min_element(revealed.parts.begin(), revealed.parts.end(),
                               [](const auto& a, const auto& b) { return a.size() < b.size(); })
                  ->size(),
              std::max_element(revealed.parts.begin(), revealed.parts.end(), [](const auto& a, const auto& b) {
                return a.size() < b.size();
              })->size());
  const std::string text = revealed.skeleton.text();
  if (text.size() <= 2000)
    std::printf("skeleton: %s\n", text.c_str());
  else
    std::printf("skeleton: %zu characters (--json or --json-out has it whole)\n", text.size());
  std::printf("schedule: %s\n",
              match.schedules.empty() ? "none of the schedules compared has these parts" : match.schedules[0].c_str());
  std::printf("parts met as a chain in some order: %s\n", revealed.chain_of_parts ? "yes" : "no");
  if (revealed.uniform_order_distance >= 0) {
    size_t met_calls = 0;
    std::printf("parts arrived when two met (calls):");
    for (const auto& [k, calls] : revealed.parts_met) {
      std::printf(" %zu:%zu", k, calls);
      met_calls += calls;
    }
    std::printf(
        "\ndistance from a uniformly random order: %.3f (sampling alone: about %.3f)\n",
        revealed.uniform_order_distance,
        std::sqrt(static_cast<double>(revealed.parts.size()) / static_cast<double>(std::max<size_t>(1, met_calls))));
  }
  if (verified) {
    std::printf(
        "replayed on %zu random inputs: the parts replayed, added as floats in %s (%zu a trial; their results: "
        "%zu distinct, median):\n",
        verified->trials, verified->every_order ? "every order" : "a sample of orders", verified->orders,
        verified->distinct_results);
    for (const auto& sc : verified->scores)
      std::printf("  %zu/%zu had an order giving the function's bits with %s\n", sc.identical, verified->trials,
                  reveal::arithmetic_name(sc.arithmetic).c_str());
  }
  return 0;
}

int run_reveal(RevealArgs args) {
  if (args.n < 2 || args.n > 65536) throw UsageError("--n must be from 2 to 65536");
  if (args.signature == "sum" && args.dot_product) throw UsageError("--dot and --signature sum say different things");
  if (args.signature.empty()) args.signature = args.dot_product ? "dot" : "sum";
  args.dot_product = args.signature != "sum";
  if (args.gemm_shape.size() != 2 || args.gemm_shape[0] < 1 || args.gemm_shape[1] < 1 || args.gemm_shape[0] > 4096 ||
      args.gemm_shape[1] > 4096)
    throw UsageError("--gemm-shape takes two numbers from 1 to 4096: ROWS,COLS");
  if (args.verify > 1000000) throw UsageError("--verify must be at most 1000000 trials");
  if (args.runs == 1 || args.runs > 1000) throw UsageError("--runs must be from 2 to 1000");
  const reveal::SharedFunction function(args.library, args.symbol);
  const reveal::DotFunction dot = args.dot_product ? dot_of(args, function) : nullptr;  // the probes' b = 1
  const reveal::SumFunction sum = args.dot_product ? reveal::dot_with_ones(dot) : function.as_sum();
  if (args.runs) return run_reveal_varying(args, function, sum);
  const reveal::RevealedSum revealed = reveal::reveal_sum(sum, args.n);
  const reveal::ScheduleMatch match = reveal::match_schedule(revealed.tree);
  const sim::AdditionTree& tree = revealed.tree;
  std::optional<reveal::Verification> verified;
  std::vector<reveal::ScheduleReplay> schedule_replays;
  if (args.verify > 0) {
    verified = args.dot_product ? reveal::verify_dot(dot, revealed.tree, args.verify, args.seed)
                                : reveal::verify_sum(sum, revealed.tree, args.verify, args.seed);
    schedule_replays = args.dot_product
                           ? reveal::replay_schedules_dot(dot, match.schedules, args.n, args.verify, args.seed)
                           : reveal::replay_schedules_sum(sum, match.schedules, args.n, args.verify, args.seed);
  }
  if (!args.dot_file.empty()) util::write_file_atomically(args.dot_file, revealed.tree.dot());

  nlohmann::json doc = {{"library", args.library},
                        {"symbol", args.symbol},
                        {"form", args.dot_product ? "dot" : "sum"},
                        {"signature", args.signature},
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
    nlohmann::json by_schedule = nlohmann::json::array();
    for (const auto& r : schedule_replays) by_schedule.push_back({{"schedule", r.schedule}, {"identical", r.identical}});
    doc["verify"] = {{"trials", verified->trials},
                     {"seed", args.seed},
                     {"inputs", verified->inputs},
                     {"replays", scores},
                     {"schedule_replays", by_schedule}};
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
    bool schedule_replays_all = false;
    for (const auto& r : schedule_replays) {
      std::printf("  %zu/%zu bit-identical with the schedule %s (fp32, products fused, its stages' formats)\n",
                  r.identical, verified->trials, r.schedule.c_str());
      schedule_replays_all = schedule_replays_all || r.identical == verified->trials;
    }
    if (!schedule_replays_all && (verified->scores.empty() || verified->scores[0].identical < verified->trials))
      std::printf(
          "no arithmetic replays every trial: the function is not this tree of plain additions (a compensated "
          "sum, an order that depends on the values, or nondeterminism)\n");
  }
  return 0;
}

}  // namespace

void add_reveal_command(CLI::App& app, Runner& run) {
  auto args = std::make_shared<RevealArgs>();
  CLI::App* cmd = app.add_subcommand("reveal", "Reveal the addition order of a real library function by probing it");
  cmd->add_option("--so", args->library, "the shared library (a path, or a name the dynamic loader finds)")->required();
  cmd->add_option("--symbol", args->symbol,
                  "the C function: float f(const float* x, size_t n), or with --dot "
                  "float f(const float* a, const float* b, size_t n)")
      ->required();
  cmd->add_option("-n,--n", args->n, "number of terms")->capture_default_str()->check(whole_number());
  cmd->add_flag("--dot", args->dot_product, "the function is a dot product (probed with b = 1)");
  cmd->add_option("--signature", args->signature,
                  "the function's C signature: sum (the default), dot (as --dot), cblas_sdot (float f(int n, const "
                  "float* x, int incx, const float* y, int incy)) or cblas_sgemm (BLAS's GEMM: the order of output "
                  "(0, 0) of a row-major ROWS x n by n x COLS product, --gemm-shape)")
      ->check(CLI::IsMember({"sum", "dot", "cblas_sdot", "cblas_sgemm"}));
  cmd->add_option("--gemm-shape", args->gemm_shape, "ROWS,COLS of the cblas_sgemm probe")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--verify", args->verify,
                  "replay the revealed tree on this many random inputs and count bit-identical results (with --runs: "
                  "results that some order of the replayed parts gives)")
      ->check(whole_number());
  cmd->add_option("--runs", args->runs,
                  "for an order that varies from call to call (atomics): ask the pairs of a part this many times; "
                  "deterministic parts, and how they were combined")
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
      "  fplab reveal --so build/tests/libreveal_targets.so --symbol pairwise_sum --n 12 --tree-dot tree.dot\n"
      "  fplab reveal --so build/tests/libreveal_targets.so --symbol blocks_any_order_sum --n 64 --runs 6 --verify 20\n"
      "  fplab reveal --so build/tests/libreveal_targets.so --symbol lanes8_cblas_sdot --signature cblas_sdot --n 40\n"
      "  fplab reveal --so libopenblas.so.0 --symbol cblas_sdot --signature cblas_sdot --n 100 --verify 100");
  cmd->callback([&run, args] { run = [args] { return run_reveal(*args); }; });  // a copy: run_reveal settles --dot
}

}  // namespace fplab::app
