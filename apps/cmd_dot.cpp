// fplab dot: the dot product of two lists under one or more schedules, beside the exact one.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "apps/arithmetic_options.hpp"
#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "apps/judge.hpp"
#include "fp/number_text.hpp"
#include "sim/reference_evaluator.hpp"
#include "sim/schedule.hpp"

namespace fplab::app {
namespace {

struct DotArgs {
  std::string a, b;
  std::string schedules;
  ArithmeticArgs arithmetic;
  uint64_t impl_seed = 0;
  bool json = false;
};

int run_dot(const DotArgs& args) {
  struct Named {
    std::string given;
    sim::Schedule schedule;
  };
  std::vector<Named> schedules;
  for (const auto& text : sim::split_schedule_list(args.schedules)) schedules.push_back({text, sim::parse_schedule(text)});
  const sim::Arithmetic arithmetic = args.arithmetic.parse();
  if (args.a == "-" && args.b == "-") throw UsageError("--a and --b cannot both be - (stdin holds one list)");
  int rounded_a = 0, rounded_b = 0;
  const std::vector<double> a = load_numbers(args.a, "--a", arithmetic.format, rounded_a);
  const std::vector<double> b = load_numbers(args.b, "--b", arithmetic.format, rounded_b);
  if (a.size() != b.size())
    throw UsageError("--a has " + std::to_string(a.size()) + " numbers and --b " + std::to_string(b.size()) +
                     ": a dot product needs two lists of the same length");
  const Judge judge(a, b, arithmetic.format, arithmetic.mode);

  // The reference evaluator is the engine's own definition of a dot product under a schedule
  // (products entering per arithmetic.products); the engine is held to it bit for bit.
  nlohmann::json results = nlohmann::json::array();
  std::vector<double> values;
  for (const auto& s : schedules) {
    const double v = sim::dot_reference(s.schedule, a, b, arithmetic, {args.impl_seed});
    values.push_back(v);
    results.push_back({{"name", s.given},
                       {"schedule", sim::to_string(s.schedule)},
                       {"nondeterministic", s.schedule.nondeterministic()},
                       {"value", json_number(v)},
                       {"value_text", fp::format_double(v)},
                       {"overflow", std::isinf(v) && std::isfinite(judge.exact())},
                       {"error", json_number(judge.error(v))},
                       {"ulps", json_number(judge.ulps(v))}});
  }
  if (args.json) {
    nlohmann::json out = {{"format", arithmetic.format.name},
                          {"mode", fp::mode_name(arithmetic.mode)},
                          {"arithmetic", arithmetic.to_string()},
                          {"pairs", a.size()},
                          {"inputs_rounded", rounded_a + rounded_b},
                          {"impl_seed", args.impl_seed},
                          {"results", results}};
    add_exact_fields(out, judge);
    print_json(out);
    return 0;
  }
  std::printf("dot product of %zu pairs, products a[i] * b[i] summed in %s", a.size(),
              arithmetic.to_string().c_str());
  if (rounded_a + rounded_b)
    std::printf(" (%d inputs were not %s values and were rounded to nearest first)", rounded_a + rounded_b,
                arithmetic.format.name.c_str());
  std::printf("\n");
  print_exact_lines(judge, arithmetic.format, "  ", 10);
  size_t width = 14;
  for (const auto& r : results) width = std::max(width, r["name"].get<std::string>().size());
  std::printf("\n  %-*s %-26s %s\n", static_cast<int>(width), "schedule", "value", "error");
  for (size_t i = 0; i < results.size(); ++i) {
    const bool overflow = results[i]["overflow"];  // then "correctly rounded" would only flatter it
    std::printf("  %-*s %-26s %s%s\n", static_cast<int>(width), results[i]["name"].get<std::string>().c_str(),
                fp::format_double(values[i]).c_str(), error_text(judge, values[i]).c_str(),
                !overflow && values[i] == judge.exact_rounded() ? "  (correctly rounded)" : "");
  }
  for (size_t i = 0; i < schedules.size(); ++i)
    if (schedules[i].schedule.nondeterministic()) {
      std::printf("\n  impl seed %llu (atomic/shuffle steps: another seed is another run of the same hardware)\n",
                  static_cast<unsigned long long>(args.impl_seed));
      break;
    }
  return 0;
}

}  // namespace

void add_dot_command(CLI::App& app, Runner& run) {
  auto args = std::make_shared<DotArgs>();
  CLI::App* cmd =
      app.add_subcommand("dot", "Dot product of two lists in the order of one or more schedules, beside the exact one");
  cmd->add_option("--a", args->a, "the first list: one number per line (- for stdin)")->required();
  cmd->add_option("--b", args->b, "the second list, as long as the first (- for stdin)")->required();
  cmd->add_option("-s,--schedule", args->schedules,
                  "schedule text or preset, or several separated by commas (docs/schedules.md)")
      ->required();
  add_arithmetic_options(cmd, args->arithmetic, true);
  cmd->add_option("--impl-seed", args->impl_seed, "implementation-noise seed (atomic, shuffle, sr)")
      ->capture_default_str()
      ->check(whole_number());
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->footer(
      "Examples:\n"
      "  printf '1e8\\n1\\n-1e8\\n1\\n' > a.txt && printf '1\\n1\\n1\\n1\\n' > b.txt && "
      "fplab dot --a a.txt --b b.txt --schedule seq,rev,pairwise\n"
      "  seq 1 1000 > a.txt && seq 1000 -1 1 | fplab dot --a a.txt --b - --schedule seq,pairwise,numpy --format bf16"
      "    # b from stdin\n"
      "  printf '0.1\\n0.7\\n-0.3\\n1.9\\n' > a.txt && printf '3.3\\n-6.1\\n7.7\\n1.3\\n' > b.txt && "
      "fplab dot --a a.txt --b b.txt --schedule seq,rev --format bf16 --products rounded    # try fused\n"
      "  seq 1 64 > a.txt && seq 1 64 | fplab dot --a a.txt --b - --schedule 'splitk(4),tc-h100-tf32,atomic' "
      "--impl-seed 3 --json");
  cmd->callback([&run, args] { run = [args] { return run_dot(*args); }; });
}

}  // namespace fplab::app
