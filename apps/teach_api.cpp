#include "apps/teach_api.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "apps/cli_support.hpp"
#include "apps/judge.hpp"
#include "apps/trace_output.hpp"
#include "fp/format.hpp"
#include "fp/number_text.hpp"
#include "fp/round.hpp"
#include "sim/engine.hpp"
#include "sim/generate.hpp"
#include "sim/schedule.hpp"
#include "sim/schedule_trace.hpp"

namespace fplab::app {
namespace {

template <class T>
T field(const nlohmann::json& request, const char* name, T fallback) {
  if (!request.contains(name) || request[name].is_null()) return fallback;
  try {
    return request[name].get<T>();
  } catch (const nlohmann::json::exception&) {
    throw UsageError(std::string("'") + name + "' has the wrong type");
  }
}

// The page's generators: named for learners, each a sim::generate spec or a list built here.
std::vector<double> generated(const std::string& spec, uint64_t seed) {
  if (spec.starts_with("big-and-ones:")) {
    // One large value then ones: in fp32, 2^24 + 1 rounds back to 2^24, so left to right every
    // one is lost; any order that adds the ones first keeps them.
    const auto n = sim::generate("ones:" + spec.substr(13), seed).size();
    std::vector<double> v(n, 1.0);
    v[0] = 16777216.0;
    return v;
  }
  return sim::generate(spec, seed);
}

std::vector<std::string> split_numbers(const std::string& text) {
  if (text.size() > kTeachMaxNumberChars)
    throw UsageError("the numbers are " + std::to_string(text.size()) + " characters long; the page takes at most " +
                     std::to_string(kTeachMaxNumberChars) + " (use fplab reduce --file for more)");
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (std::isspace(static_cast<unsigned char>(text[i])) || text[i] == ',' || text[i] == ';')) ++i;
    const size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i])) && text[i] != ',' && text[i] != ';') ++i;
    if (i > start) {
      if (out.size() == kTeachMaxTerms)
        throw UsageError("more than " + std::to_string(kTeachMaxTerms) +
                         " numbers; the page sums at most that many (use fplab reduce --file for more)");
      out.push_back(text.substr(start, i - start));
    }
  }
  if (out.empty()) throw UsageError("no numbers: type some, or pick a generator");
  return out;
}

std::string ulps_text(double ulps) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.3g", std::fabs(ulps));
  return buffer;
}

// One sentence on the worst order: its largest dropped error and what caused it.
std::string why_sentence(const nlohmann::json& orders, const Judge& judge, const std::string& format) {
  const nlohmann::json* worst = nullptr;
  double worst_ulps = 0;
  for (const auto& o : orders) {
    if (o.contains("error_message")) continue;
    if (o["ulps"].is_null()) {
      if (o["overflow"].get<bool>())
        return o["label"].get<std::string>() + " overflowed: a partial sum passed " + format + "'s largest value (" +
               fp::format_double(fp::parse_format(format).max_finite()) + ") although the exact sum did not.";
      continue;
    }
    const double u = std::fabs(o["ulps"].get<double>());
    if (!worst || u > worst_ulps) worst = &o, worst_ulps = u;
  }
  if (!worst) return "No order gave a finite result to compare.";
  const auto label = (*worst)["label"].get<std::string>();
  if (worst_ulps == 0) return "Every order gave the exact sum: no addition here had to round.";
  if ((*worst)["value"] == json_number(judge.exact_rounded()) && worst_ulps <= 1)
    return "Every order gave the correctly rounded sum (within " + ulps_text(worst_ulps) +
           " ulp of the exact one): the roundings along the way cancelled or did not matter.";
  if (!(*worst).contains("trace") || (*worst)["trace"].is_null())
    return label + " is off by " + ulps_text(worst_ulps) + " ulps; give at most " +
           std::to_string(kTeachMaxTracedTerms) + " numbers to see which addition lost it.";
  const auto& steps = (*worst)["trace"]["steps"];
  const nlohmann::json* largest = nullptr;
  for (const auto& s : steps)
    if (!s["error"].is_null() && (!largest || std::fabs(s["error"].get<double>()) > std::fabs((*largest)["error"].get<double>())))
      largest = &s;
  if (!largest || (*largest)["error"].get<double>() == 0)
    return label + " is off by " + ulps_text(worst_ulps) + " ulps although no single step dropped anything visible.";
  const auto& s = *largest;
  std::string sentence = label + " is off by " + ulps_text(worst_ulps) + " ulps mostly because step " +
                         s["step"].get<std::string>();
  if (s["kind"] == "addition") {
    const double a = s["operands"][0]["value"].get<double>(), b = s["operands"][1]["value"].get<double>();
    const double small = std::min(std::fabs(a), std::fabs(b)), large = std::max(std::fabs(a), std::fabs(b));
    sentence += " added " + s["operands"][0]["value_text"].get<std::string>() + " and " +
                s["operands"][1]["value_text"].get<std::string>() + ": the exact " +
                shortened_exact_text(s["exact_text"].get<std::string>(), 20) + " is not representable in " +
                format + ", so it became " + s["value_text"].get<std::string>() + ", dropping " +
                s["error_text"].get<std::string>();
    // A step with a finite error has a finite value (trace_json writes null only for inf/NaN).
    const double result = std::fabs(s["value"].get<double>());
    if (small > 0 && result == large)
      sentence += " (the smaller number was below half a step of " + format + " at the larger one, so it vanished)";
    else if (small > 0 && large / small < 4 && result > 0 && result < large / 4)
      sentence += " (after a cancellation)";
  } else {
    sentence += " (" + s["label"].get<std::string>() + " over " + std::to_string(s["operands"].size()) +
                " terms) rounded its exact " + shortened_exact_text(s["exact_text"].get<std::string>(), 20) + " to " +
                s["value_text"].get<std::string>() + ", dropping " + s["error_text"].get<std::string>();
    if (s["kind"] == "fused") sentence += ", after cutting every aligned term to the grid";
  }
  return sentence + ".";
}

}  // namespace

const std::vector<TeachOrder>& teach_orders() {
  static const std::vector<TeachOrder> orders = {
      {"seq", "Sequential", "all:seq", "left to right: ((x0 + x1) + x2) + ..."},
      {"rev", "Reversed", "all:rev", "right to left: x0 + (x1 + (... + x(n-1)))"},
      {"pairwise", "Pairwise", "all:tree", "a balanced tree: halves summed, then added"},
      {"numpy", "NumPy's sum", "numpy",
       "NumPy's float32 sum (NumPy 2.3 and later): 8 running sums, blocks halved past 128 terms"},
      {"warp", "GPU warp", "strided(32):seq | all:shfl_down",
       "32 threads each add every 32nd number, then a shuffle tree joins the 32"},
      {"splitk", "Split-K (4 parts)", "split(4):seq | all:seq", "4 contiguous parts summed apart, then added in order"},
      {"atomic", "Atomics", "all:atomic", "every number added by an atomic in the order the threads happened to arrive"},
      {"tensor", "Tensor core (H100, TF32)", "tc-h100-tf32-rne",
       "fused steps of 8: inputs rounded to TF32, aligned to the largest, cut to 25 fraction bits, one rounding toward "
       "zero"},
      {"kahan", "Kahan", "all:kahan", "compensated: a second variable carries each addition's rounding error"},
  };
  return orders;
}

nlohmann::json teach_catalogue() {
  nlohmann::json orders = nlohmann::json::array();
  for (const auto& o : teach_orders())
    orders.push_back({{"key", o.key},
                      {"label", o.label},
                      {"schedule", sim::to_string(sim::parse_schedule(o.schedule))},
                      {"preset", o.schedule},
                      {"explanation", o.explanation}});
  return {{"orders", orders},
          {"formats", {"fp32", "bf16", "fp16", "tf32", "e4m3", "e5m2", "fp64"}},
          {"modes",
           {{{"key", "rne"}, {"label", "to nearest, ties to even"}},
            {{"key", "rna"}, {"label", "to nearest, ties away"}},
            {{"key", "rz"}, {"label", "toward zero"}},
            {{"key", "ru"}, {"label", "up"}},
            {{"key", "rd"}, {"label", "down"}},
            {{"key", "ro"}, {"label", "to odd"}},
            {{"key", "sr"}, {"label", "stochastic"}}}},
          {"generators",
           {{{"key", "cancel:16"}, {"label", "Cancellation"}},
            {{"key", "lognormal:16"}, {"label", "A wide range"}},
            {{"key", "big-and-ones:16"}, {"label", "Ones and a large value"}},
            {{"key", "normal:16"}, {"label", "Random normal"}}}},
          {"limits",
           {{"terms", kTeachMaxTerms},
            {"characters", kTeachMaxNumberChars},
            {"traced_terms", kTeachMaxTracedTerms},
            {"runs", kTeachMaxRuns}}}};
}

nlohmann::json teach_explain(const nlohmann::json& request) {
  if (!request.is_object()) throw UsageError("the request must be a JSON object");
  const std::string format_text = field<std::string>(request, "format", "fp32");
  const std::string mode_text = field<std::string>(request, "mode", "rne");
  const fp::Format format = fp::parse_format(format_text);
  const fp::Mode mode = fp::parse_mode(mode_text);
  const uint64_t seed = field<uint64_t>(request, "seed", 1);
  const uint64_t impl_seed = field<uint64_t>(request, "impl_seed", 0);
  const size_t runs_wanted = std::min<size_t>(field<size_t>(request, "runs", 200), kTeachMaxRuns);

  // The terms: typed numbers rounded once to the format (as fplab sum and reduce --file do), or
  // generated ones (as reduce --gen does).
  std::vector<double> terms;
  int rounded = 0;
  const std::string gen = field<std::string>(request, "gen", "");
  if (!gen.empty()) {
    std::vector<double> raw = generated(gen, seed);
    if (raw.size() > kTeachMaxTerms)
      throw UsageError("the generator gives " + std::to_string(raw.size()) + " numbers; the page sums at most " +
                       std::to_string(kTeachMaxTerms));
    for (double x : raw) {
      const fp::Rounded r = fp::round_double(x, format, {});
      terms.push_back(r.value);
      rounded += r.inexact;
    }
  } else {
    const auto texts = split_numbers(field<std::string>(request, "numbers", ""));
    for (size_t i = 0; i < texts.size(); ++i) {
      fp::ExactValue exact;
      try {
        exact = fp::parse_number(texts[i]);
      } catch (const fp::FormatError&) {
        throw UsageError("cannot read '" + texts[i].substr(0, 40) + "' (number " + std::to_string(i + 1) +
                         ") as a number: use decimals like 0.1, -3e5 or hex floats like 0x1.8p3");
      }
      if (exact.kind == fp::ExactValue::Kind::nan || exact.kind == fp::ExactValue::Kind::infinite)
        throw UsageError("number " + std::to_string(i + 1) + " is '" + texts[i] +
                         "': NaN and infinities have no exact sum to compare the orders with; remove it");
      const fp::Rounded r = fp::round_exact(exact, format, {});
      terms.push_back(r.value);
      rounded += r.inexact;
    }
  }
  for (size_t i = 0; i < terms.size(); ++i)
    if (!std::isfinite(terms[i]))
      throw UsageError("number " + std::to_string(i + 1) + " is beyond " + format.name + "'s range (largest " +
                       fp::format_double(format.max_finite()) + ") and became " + fp::format_double(terms[i]));

  // The orders asked for, in the catalogue's order, then a custom schedule.
  std::vector<TeachOrder> chosen;
  const auto keys = field<std::vector<std::string>>(request, "orders", {"seq", "rev", "pairwise"});
  for (const auto& key : keys) {
    if (key == "custom") continue;
    const auto it = std::find_if(teach_orders().begin(), teach_orders().end(), [&](const auto& o) { return o.key == key; });
    if (it == teach_orders().end()) throw UsageError("unknown order '" + key.substr(0, 40) + "'");
    chosen.push_back(*it);
  }
  const std::string custom = field<std::string>(request, "custom", "");
  if (!custom.empty()) chosen.push_back({"custom", "Custom: " + custom.substr(0, 80), custom, "your schedule"});
  if (chosen.empty()) throw UsageError("pick at least one order");

  sim::Arithmetic arithmetic;
  arithmetic.format = format;
  arithmetic.mode = mode;
  const Judge judge(terms, format, mode);
  const bool traced = terms.size() <= kTeachMaxTracedTerms;

  nlohmann::json out_orders = nlohmann::json::array();
  for (const auto& order : chosen) {
    sim::Schedule schedule;
    try {
      schedule = sim::parse_schedule(order.schedule);
    } catch (const std::exception& e) {
      throw UsageError("schedule '" + order.schedule.substr(0, 80) + "': " + one_line(e.what()));
    }
    const sim::NoiseKey key{impl_seed};
    double value = 0;
    try {
      value = sim::reduce(schedule, terms, arithmetic, key);
    } catch (const std::invalid_argument& e) {
      // An order this arithmetic cannot run (tensor cores do not round stochastically): said
      // beside that order, the others still answer.
      out_orders.push_back({{"key", order.key},
                            {"label", order.label},
                            {"schedule", sim::to_string(schedule)},
                            {"explanation", order.explanation},
                            {"error_message", one_line(e.what())}});
      continue;
    }
    nlohmann::json o = {{"key", order.key},
                        {"label", order.label},
                        {"schedule", sim::to_string(schedule)},
                        {"explanation", order.explanation},
                        {"nondeterministic", schedule.nondeterministic() || mode == fp::Mode::sr},
                        {"value", json_number(value)},
                        {"value_text", fp::format_double(value)},
                        {"error", json_number(judge.error(value))},
                        {"ulps", json_number(std::isinf(value) ? NAN : judge.ulps(value))},
                        {"overflow", std::isinf(value) && std::isfinite(judge.exact())},
                        {"correctly_rounded", value == judge.exact_rounded()}};
    if (traced) {
      const sim::ScheduleTrace trace = sim::trace_schedule(schedule, terms, arithmetic, key);
      o["trace"] = trace_json(trace);
    }
    if (o["nondeterministic"].get<bool>()) {
      // Other runs of the same hardware: implementation seeds 0, 1, 2, ... (the one shown among them).
      const size_t runs = std::max<size_t>(1, std::min(runs_wanted, size_t{20'000'000} / terms.size()));
      std::map<double, int> counts;
      for (size_t r = 0; r < runs; ++r) ++counts[sim::reduce(schedule, terms, arithmetic, {r})];
      nlohmann::json bins = nlohmann::json::array();
      for (const auto& [v, count] : counts)
        bins.push_back({{"value", json_number(v)},
                        {"value_text", fp::format_double(v)},
                        {"ulps", json_number(std::isinf(v) ? NAN : judge.ulps(v))},
                        {"count", count}});
      o["histogram"] = {{"runs", runs}, {"bins", bins}};
    }
    out_orders.push_back(std::move(o));
  }

  nlohmann::json terms_json = nlohmann::json::array();
  if (traced)
    for (double t : terms) terms_json.push_back(fp::format_double(t));
  nlohmann::json out = {{"format", format.name},
                        {"mode", fp::mode_name(mode)},
                        {"count", terms.size()},
                        {"inputs_rounded", rounded},
                        {"terms", terms_json},
                        {"ulp", json_number(judge.ulp())},
                        {"traced", traced},
                        {"orders", out_orders}};
  add_exact_fields(out, judge);
  out["why"] = why_sentence(out_orders, judge, format.name);
  return out;
}

}  // namespace fplab::app
