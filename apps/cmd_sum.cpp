// fplab sum: the same numbers added in different orders, beside the exact sum.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "apps/judge.hpp"
#include "apps/trace_output.hpp"
#include "fp/number_text.hpp"
#include "fp/round.hpp"
#include "sim/schedule_trace.hpp"
#include "sim/summation_order.hpp"

namespace fplab::app {
namespace {

struct SumArgs {
  std::vector<std::string> values;
  std::string file;
  std::string format = "fp32";
  std::string mode = "rne";
  std::string orders = "seq,rev,pairwise,sorted-asc,sorted-desc,random:1000";
  uint64_t seed = 1;
  std::string exact_of = "terms";
  bool json = false;
  bool trace = false;
};

nlohmann::json histogram(const std::vector<double>& values, const Judge& judge) {
  std::map<double, int> counts;
  for (double v : values) ++counts[v];
  nlohmann::json bins = nlohmann::json::array();
  for (const auto& [value, count] : counts)
    bins.push_back({{"value", json_number(value)},
                    {"value_text", fp::format_double(value)},
                    {"ulps", json_number(judge.ulps(value))},
                    {"count", count}});
  return bins;
}

int run_sum(const SumArgs& args) {
  const fp::Format format = fp::parse_format(args.format);
  const fp::Mode mode = fp::parse_mode(args.mode);
  const auto orders = sim::parse_summation_orders(args.orders);
  const auto texts = read_number_texts(args.values, args.file);

  // The terms are the inputs as values of the format (rounded once, nearest-even).
  std::vector<double> terms, inputs;
  int changed = 0;
  for (const auto& text : texts) {
    const fp::Rounded r = fp::round_exact(fp::parse_number(text), format, {});
    terms.push_back(r.value);
    inputs.push_back(fp::parse_double(text));
    changed += r.inexact;
  }
  const ExactOf exact_of = args.exact_of == "inputs" ? ExactOf::inputs : ExactOf::terms;
  fp::CounterRng stream(fp::mix_key({args.seed, 0x5352}));  // for --mode sr only
  const fp::RoundingOptions options{mode, false, false, &stream};

  const Judge judge(exact_of == ExactOf::inputs ? inputs : terms, format, mode);
  const double u = unit_roundoff(format, mode);
  const double bound = error_bound(terms.size() - 1, u, judge.sum_of_magnitudes());

  nlohmann::json out_orders = nlohmann::json::array();
  int name_width = 14;  // a schedule order may be named by its whole text
  for (const auto& order : orders) name_width = std::max(name_width, static_cast<int>(order.name().size()));
  if (!args.json) {
    std::printf("%zu numbers summed in %s with %s", terms.size(), format.name.c_str(),
                std::string(fp::mode_name(mode)).c_str());
    if (changed)
      std::printf(" (%d inputs were not %s values and were rounded to nearest first)", changed, format.name.c_str());
    std::printf("\n");
    print_exact_lines(judge, format, "  ", 10, exact_of);
    std::printf("\n  %-*s %-26s %-14s %s\n", name_width, "order", "value", "error", "in ulps");
  }
  if (args.trace && terms.size() > kMaxTracedTerms)
    throw UsageError("--trace prints every step: give at most " + std::to_string(kMaxTracedTerms) + " numbers, not " +
                     std::to_string(terms.size()));
  std::vector<std::pair<std::string, sim::ScheduleTrace>> traces;
  for (const auto& order : orders) {
    if (args.trace) {
      // Traced from the rounding stream the sum draws from, in its state before this order, so
      // that sr draws as the sum did.
      const auto as_schedule = sim::order_as_schedule(order, terms, args.seed);
      fp::CounterRng rounding = as_schedule.key ? as_schedule.key->rounding_stream() : stream;
      std::vector<double> arranged;
      for (size_t i : as_schedule.order_of_terms) arranged.push_back(terms[i]);
      sim::Arithmetic arithmetic;
      arithmetic.format = format;
      arithmetic.mode = mode;
      traces.emplace_back(order.name(), sim::trace_schedule(sim::parse_schedule(as_schedule.schedule), arranged,
                                                            arithmetic, as_schedule.key.value_or(sim::NoiseKey{}),
                                                            rounding, as_schedule.order_of_terms));
    }
    const auto values = sim::sum_in_order(order, terms, format, options, args.seed);
    if (order.kind != sim::SummationOrder::Kind::random) {
      const double v = values.front();
      out_orders.push_back({{"order", order.name()},
                            {"value", json_number(v)},
                            {"value_text", fp::format_double(v)},
                            {"ulps", json_number(judge.ulps(v))},
                            {"error", json_number(judge.error(v))},
                            {"overflow", std::isinf(v) && std::isfinite(judge.exact())}});
      if (order.kind == sim::SummationOrder::Kind::schedule)
        out_orders.back()["schedule"] = sim::to_string(order.schedule);  // a preset's expansion
      if (!args.json && std::isinf(v) && std::isfinite(judge.exact()))
        std::printf("  %-*s %-26s overflow\n", name_width, order.name().c_str(), fp::format_double(v).c_str());
      else if (!args.json)
        std::printf("  %-*s %-26s %-+14.6g %+.3f%s\n", name_width, order.name().c_str(), fp::format_double(v).c_str(),
                    judge.error(v), judge.ulps(v), v == judge.exact_rounded() ? "  (correctly rounded)" : "");
      continue;
    }
    const auto bins = histogram(values, judge);
    // The most frequent result stands for the random orders in the "value" field.
    const auto& mode_bin = *std::max_element(bins.begin(), bins.end(),
                                             [](const auto& a, const auto& b) { return a["count"] < b["count"]; });
    const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
    out_orders.push_back({{"order", order.name()},
                          {"value", mode_bin["value"]},
                          {"ulps", mode_bin["ulps"]},
                          {"permutations", values.size()},
                          {"distinct", bins.size()},
                          {"min", json_number(*lo)},
                          {"max", json_number(*hi)},
                          {"histogram", bins}});
    if (!args.json) {
      std::printf("  %-*s %zu distinct results over %zu random orders, from %s to %s:\n", name_width,
                  order.name().c_str(), bins.size(), values.size(), fp::format_double(*lo).c_str(),
                  fp::format_double(*hi).c_str());
      const int widest = std::max_element(bins.begin(), bins.end(), [](const auto& a, const auto& b) {
                           return a["count"] < b["count"];
                         })->at("count");
      size_t shown = 0;
      for (const auto& bin : bins) {
        if (++shown > 20) {
          std::printf("      ... %zu more distinct results (see --json)\n", bins.size() - 20);
          break;
        }
        const int bar = std::max(1, static_cast<int>(40.0 * bin["count"].get<int>() / widest));
        const double v = fp::parse_double(bin["value_text"].get<std::string>());  // "value" is null for inf
        char ulps[32] = "overflow";
        if (!bin["ulps"].is_null()) std::snprintf(ulps, sizeof ulps, "%+.3f ulps", bin["ulps"].get<double>());
        std::printf("      %-24s %18s %6d %s\n", fp::format_double(v).c_str(), ulps, bin["count"].get<int>(),
                    std::string(bar, '#').c_str());
      }
    }
  }
  for (size_t i = 0; i < traces.size(); ++i) out_orders[i]["trace"] = trace_json(traces[i].second);
  if (args.json) {
    nlohmann::json out = {{"format", format.name},
                          {"mode", fp::mode_name(mode)},
                          {"count", terms.size()},
                          {"inputs_rounded", changed},
                          {"exact_of", args.exact_of},
                          {"error_bound", json_number(bound)},
                          {"error_bound_ulps", json_number(bound / judge.ulp())},
                          {"orders", out_orders}};
    add_exact_fields(out, judge);
    print_json(out);
  } else {
    std::printf("\n  error bound for recursive summation in any order: |error| <= %.4g (%.4g ulps)\n", bound,
                bound / judge.ulp());
    std::printf(
        "  (gamma(n-1) * sum|x| with unit roundoff u = %g; the orders above differ only in which\n"
        "   additions round, and how much of each rounding error the later additions keep)\n",
        u);
    for (const auto& [name, trace] : traces) {
      std::printf("\ntrace of %s%s (tN: input number N; sN: the result of step N)\n", name.c_str(),
                  name.starts_with("random") ? ", its first random order" : "");
      print_trace(trace, "  ");
    }
  }
  return 0;
}

}  // namespace

void add_sum_command(CLI::App& app, Runner& run) {
  auto args = std::make_shared<SumArgs>();
  CLI::App* cmd = app.add_subcommand("sum", "Add numbers in several orders and compare with the exact sum");
  cmd->add_option("values", args->values, "numbers: decimal or hex-float (or use --file)");
  cmd->add_option("--file", args->file, "read one number per line from a file, or - for stdin");
  cmd->add_option("-f,--format", args->format, "working format of every addition")->capture_default_str();
  cmd->add_option("-m,--mode", args->mode, "rounding mode of every addition")->capture_default_str();
  cmd->add_option("--orders", args->orders,
                  "comma-separated: seq rev pairwise sorted-asc sorted-desc random:N, or any schedule preset or text "
                  "(numpy, cuda-naive-sum(256,64), 'contig(8):seq | all:tree'; docs/schedules.md)")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "seed of the random orders (and of sr rounding)")
      ->capture_default_str()
      ->check(whole_number());
  cmd->add_option("--exact-of", args->exact_of,
                  "what the exact sum (and every error) is of: terms = the inputs rounded to the format first (the "
                  "best any order can give), inputs = the numbers as given, each read as the nearest double")
      ->capture_default_str()
      ->check(CLI::IsMember({"terms", "inputs"}));
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->add_flag("--trace", args->trace,
                "show every addition of each order: operands, exact result, rounded result, dropped error "
                "(random:N: its first order)");
  cmd->footer(
      "Examples:\n"
      "  fplab sum 1e8 1 -1e8 1 --format fp32\n"
      "  fplab sum 1e8 1 -1e8 1 --orders seq,sorted-asc --trace    # which addition lost the 1\n"
      "  fplab sum 0.1 0.2 0.3 --format bf16 --orders seq,rev\n"
      "  fplab sum 1.0004 1.0004 1.0004 --format fp16 --exact-of inputs    # 3.002: the terms' roundings add up\n"
      "  seq 1 20000 | fplab sum --file - --orders seq,numpy,numpy-2.2,kahan    # NumPy 2.3 and 2.2 differ\n"
      "  fplab sum 1e8 1 -1e8 1 --orders 'cuda-naive-sum(32,1),contig(2):seq | all:tree' --trace\n"
      "  seq 1 100 | fplab sum --file - --format fp16 --orders seq,pairwise,random:100    # orders differ by ulps\n"
      "  seq 1 1000 | fplab sum --file - --format fp16 --json    # 500500 overflows fp16 (max 65504)");
  cmd->callback([&run, args] { run = [args] { return run_sum(*args); }; });
}

}  // namespace fplab::app
