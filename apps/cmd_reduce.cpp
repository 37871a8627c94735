// fplab reduce: one reduction of data under a schedule and an arithmetic, beside the exact sum.
#include <cmath>
#include <cstdio>
#include <optional>

#include "apps/arithmetic_options.hpp"
#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "apps/judge.hpp"
#include "apps/trace_output.hpp"
#include "fp/number_text.hpp"
#include "sim/engine.hpp"
#include "sim/schedule.hpp"
#include "sim/schedule_trace.hpp"

namespace fplab::app {
namespace {

struct ReduceArgs {
  std::string schedule;
  ArithmeticArgs arithmetic;
  DataArgs data;
  uint64_t impl_seed = 0;
  bool json = false;
  bool trace = false;
};

int run_reduce(const ReduceArgs& args) {
  const sim::Schedule schedule = sim::parse_schedule(args.schedule);
  const sim::Arithmetic arithmetic = args.arithmetic.parse();
  int rounded = 0;
  const std::vector<double> terms = args.data.load(arithmetic.format, rounded);
  if (args.trace && terms.size() > kMaxTracedTerms)
    throw UsageError("--trace prints every step: give at most " + std::to_string(kMaxTracedTerms) + " terms, not " +
                     std::to_string(terms.size()));
  const double value = sim::reduce(schedule, terms, arithmetic, {args.impl_seed});
  std::optional<sim::ScheduleTrace> trace;
  if (args.trace) trace = sim::trace_schedule(schedule, terms, arithmetic, {args.impl_seed});
  const Judge judge(terms, arithmetic.format, arithmetic.mode);
  const std::string canonical = sim::to_string(schedule);
  if (args.json) {
    nlohmann::json out = {{"schedule", canonical},
                          {"format", arithmetic.format.name},
                          {"mode", fp::mode_name(arithmetic.mode)},
                          {"arithmetic", arithmetic.to_string()},
                          {"terms", terms.size()},
                          {"inputs_rounded", rounded},
                          {"impl_seed", args.impl_seed},
                          {"nondeterministic", schedule.nondeterministic()},
                          {"value", json_number(value)},
                          {"value_text", fp::format_double(value)},
                          {"overflow", std::isinf(value) && std::isfinite(judge.exact())},
                          {"error", json_number(judge.error(value))},
                          {"ulps", json_number(judge.ulps(value))}};
    add_exact_fields(out, judge);
    if (trace) out["trace"] = trace_json(*trace);
    print_json(out);
    return 0;
  }
  std::printf(
      "schedule    %s\narithmetic  %s\nterms       %zu%s\n", canonical.c_str(), arithmetic.to_string().c_str(),
      terms.size(),
      rounded ? (" (" + std::to_string(rounded) + " rounded to " + arithmetic.format.name + " first)").c_str() : "");
  if (schedule.nondeterministic())
    std::printf("impl seed   %llu (atomic/shuffle steps: another seed is another run of the same hardware)\n",
                static_cast<unsigned long long>(args.impl_seed));
  std::printf("value       %s\n", fp::format_double(value).c_str());
  print_exact_lines(judge, arithmetic.format, "", 11);
  std::printf("error       %s\n", error_text(judge, value).c_str());
  if (trace) {
    std::printf("\ntrace: every rounding in the order it runs (tN: term N; sN: the result of step N)\n");
    print_trace(*trace, "  ");
  }
  return 0;
}

}  // namespace

void add_reduce_command(CLI::App& app, Runner& run) {
  auto args = std::make_shared<ReduceArgs>();
  CLI::App* cmd = app.add_subcommand("reduce", "Reduce data in the order a schedule gives, beside the exact sum");
  cmd->add_option("-s,--schedule", args->schedule, "schedule text or preset (see docs/schedules.md)")->required();
  add_arithmetic_options(cmd, args->arithmetic);
  add_data_options(cmd, args->data);
  cmd->add_option("--impl-seed", args->impl_seed, "implementation-noise seed (atomic, shuffle, sr)")
      ->capture_default_str()
      ->check(whole_number());
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->add_flag("--trace", args->trace,
                "show every rounding in order: operands, exact result, rounded result, dropped error "
                "(fused steps: the aligned terms and the bits cut)");
  cmd->footer(
      "Examples:\n"
      "  fplab reduce --schedule 'strided(32):seq | all:shfl_down' --gen normal:100000\n"
      "  fplab reduce --schedule all:seq --gen cancel:8 --format bf16 --trace    # each addition, what it dropped\n"
      "  fplab reduce --schedule tc-h100-fp16 --gen normal:20 --trace    # fused steps: aligned terms, cut bits\n"
      "  fplab reduce --schedule 'cuda-naive-sum(256,64)' --gen cancel:1000000 --impl-seed 3\n"
      "  seq 1 1000 | fplab reduce --schedule numpy --format bf16 --file - --json    # numbers from stdin");
  cmd->callback([&run, args] { run = [args] { return run_reduce(*args); }; });
}

}  // namespace fplab::app
