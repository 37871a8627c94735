// fplab reduce: one reduction of data under a schedule and an arithmetic, beside the exact sum.
#include <cmath>
#include <cstdio>

#include "apps/arithmetic_options.hpp"
#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "apps/judge.hpp"
#include "fp/number_text.hpp"
#include "sim/engine.hpp"
#include "sim/schedule.hpp"

namespace fplab::app {
namespace {

struct ReduceArgs {
  std::string schedule;
  ArithmeticArgs arithmetic;
  DataArgs data;
  uint64_t impl_seed = 0;
  bool json = false;
};

int run_reduce(const ReduceArgs& args) {
  const sim::Schedule schedule = sim::parse_schedule(args.schedule);
  const sim::Arithmetic arithmetic = args.arithmetic.parse();
  int rounded = 0;
  const std::vector<double> terms = args.data.load(arithmetic.format, rounded);
  const double value = sim::reduce(schedule, terms, arithmetic, {args.impl_seed});
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
  cmd->footer(
      "Examples:\n"
      "  fplab reduce --schedule 'strided(32):seq | all:shfl_down' --gen normal:100000\n"
      "  fplab reduce --schedule 'cuda-naive-sum(256,64)' --gen cancel:1000000 --impl-seed 3\n"
      "  seq 1 1000 | fplab reduce --schedule numpy --format bf16 --file - --json    # numbers from stdin");
  cmd->callback([&run, args] { run = [args] { return run_reduce(*args); }; });
}

}  // namespace fplab::app
