#include "apps/trace_output.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "apps/cli_support.hpp"
#include "apps/judge.hpp"
#include "fp/number_text.hpp"

namespace fplab::app {
namespace {

// The dropped error for people: "+1", "0", "overflow", "-" (no finite exact result).
std::string dropped_text(const sim::TraceStep& step) {
  if (std::isnan(step.error)) return std::isfinite(step.value) ? "-" : "overflow";
  if (step.error == 0) return "0";
  return (step.error > 0 ? "+" : "") + fp::format_double(step.error) + (step.error_is_exact ? "" : " (approx.)");
}

// "t0 + t1", "s2 + t3 + t4 + t5" (fused: the accumulator first), "kahan(t0 .. t9)".
std::string inputs_text(const sim::TraceStep& step) {
  std::string text;
  if (step.kind == sim::TraceStep::Kind::whole_group) {
    text = step.label + "(" + sim::trace_operand_name(step.operands.front());
    if (step.operands.size() > 1) text += step.operands.size() > 2 ? " .. " : ", ";
    if (step.operands.size() > 1) text += sim::trace_operand_name(step.operands.back());
    return text + ")";
  }
  for (size_t i = 0; i < step.operands.size(); ++i) {
    if (step.operands.size() > 6 && i == 3) {
      text += " + ..";
      i = step.operands.size() - 2;
      continue;
    }
    text += (i ? " + " : "") + sim::trace_operand_name(step.operands[i]);
  }
  return text;
}

std::string operands_text(const sim::TraceStep& step) {
  if (step.kind != sim::TraceStep::Kind::addition) return std::to_string(step.operands.size()) + " terms";
  const std::string right = fp::format_double(step.operands[1].value);
  return fp::format_double(step.operands[0].value) + (right[0] == '-' ? " - " + right.substr(1) : " + " + right);
}

}  // namespace

nlohmann::json trace_json(const sim::ScheduleTrace& trace) {
  nlohmann::json steps = nlohmann::json::array();
  for (size_t i = 0; i < trace.steps.size(); ++i) {
    const auto& s = trace.steps[i];
    nlohmann::json operands = nlohmann::json::array();
    for (const auto& o : s.operands)
      operands.push_back(
          {{"name", sim::trace_operand_name(o)}, {"value", json_number(o.value)}, {"value_text", fp::format_double(o.value)}});
    const char* kind = s.kind == sim::TraceStep::Kind::addition ? "addition"
                       : s.kind == sim::TraceStep::Kind::fused  ? "fused"
                                                                : "whole_group";
    nlohmann::json step = {{"step", "s" + std::to_string(i + 1)},
                           {"kind", kind},
                           {"label", s.label},
                           {"operands", operands},
                           {"exact_text", s.exact_text},
                           {"value", json_number(s.value)},
                           {"value_text", fp::format_double(s.value)},
                           {"error", json_number(s.error)},
                           {"error_text", dropped_text(s)},
                           {"error_is_exact", s.error_is_exact},
                           {"depth", s.depth}};
    if (s.kind == sim::TraceStep::Kind::fused) {
      step["grid_exponent"] = s.grid_exponent;
      nlohmann::json aligned = nlohmann::json::array();
      for (size_t t = 0; t < s.aligned.size(); ++t)
        aligned.push_back({{"name", sim::trace_operand_name(s.operands[t])},
                           {"input", json_number(s.aligned[t].input)},
                           {"kept", json_number(s.aligned[t].kept)},
                           {"dropped", json_number(s.aligned[t].dropped)}});
      step["aligned"] = aligned;
    }
    steps.push_back(std::move(step));
  }
  return {{"result", sim::trace_operand_name(trace.result)}, {"steps", steps}};
}

void print_trace(const sim::ScheduleTrace& trace, const char* indent) {
  if (trace.steps.empty()) {
    std::printf("%sno rounding step: the result is %s itself\n", indent, sim::trace_operand_name(trace.result).c_str());
    return;
  }
  struct Row {
    std::string step, inputs, operands, exact, value, error;
  };
  std::vector<Row> rows;
  Row widths{"step", "inputs", "operands", "exact", "rounded", "dropped error"};
  for (size_t i = 0; i < trace.steps.size(); ++i) {
    const auto& s = trace.steps[i];
    rows.push_back({"s" + std::to_string(i + 1), inputs_text(s), operands_text(s), shortened_exact_text(s.exact_text, 24),
                    fp::format_double(s.value), dropped_text(s)});
  }
  auto widest = [&](std::string Row::*field) {
    size_t w = (widths.*field).size();
    for (const auto& r : rows) w = std::max(w, (r.*field).size());
    return static_cast<int>(std::min<size_t>(w, 48));
  };
  const int w1 = widest(&Row::step), w2 = widest(&Row::inputs), w3 = widest(&Row::operands), w4 = widest(&Row::exact),
            w5 = widest(&Row::value);
  auto line = [&](const Row& r) {
    std::printf("%s%-*s  %-*s  %-*s  %-*s  %-*s  %s\n", indent, w1, r.step.c_str(), w2, r.inputs.c_str(), w3,
                r.operands.c_str(), w4, r.exact.c_str(), w5, r.value.c_str(), r.error.c_str());
  };
  line(widths);
  for (size_t i = 0; i < rows.size(); ++i) {
    line(rows[i]);
    const auto& s = trace.steps[i];
    if (s.kind != sim::TraceStep::Kind::fused || s.aligned.empty()) continue;
    std::printf("%s%*s  aligned to the grid 2^%lld (the largest term's exponent less the fraction bits); bits below it are cut:\n",
                indent, w1, "", static_cast<long long>(s.grid_exponent));
    for (size_t t = 0; t < s.aligned.size(); ++t) {
      const auto& a = s.aligned[t];
      std::printf("%s%*s    %-5s %-24s kept %-24s cut %s\n", indent, w1, "", sim::trace_operand_name(s.operands[t]).c_str(),
                  fp::format_double(a.input).c_str(), fp::format_double(a.kept).c_str(),
                  a.dropped == 0 ? "0" : fp::format_double(a.dropped).c_str());
    }
  }
}

}  // namespace fplab::app
