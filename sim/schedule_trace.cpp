#include "sim/schedule_trace.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

#include "fp/round.hpp"
#include "fp/superaccumulator.hpp"
#include "sim/schedule_walk.hpp"
#include "sim/tensor_core.hpp"
#include "sim/whole_group.hpp"

namespace fplab::sim {
namespace {

struct Partial {
  TraceOperand operand;
  size_t depth = 0;
};

// x cut to the grid 2^grid as a tensor core's alignment shifter cuts it (no guard bits).
double cut_to_grid(double x, int64_t grid, AlignedTruncation truncation) {
  if (x == 0 || !std::isfinite(x)) return x;
  if (grid <= -1074) return x;  // every double is a multiple of 2^-1074
  const int64_t above = int64_t{std::ilogb(x)} - grid;
  if (above >= 53) return x;  // all 53 significant bits sit on or above the grid
  if (above < 0) {
    if (truncation == AlignedTruncation::toward_zero || x > 0) return std::copysign(0.0, x);
    return -std::ldexp(1.0, static_cast<int>(grid));  // floor of a small negative value
  }
  const double scaled = std::ldexp(x, static_cast<int>(-grid));  // |scaled| < 2^53: exact
  const double whole = truncation == AlignedTruncation::toward_zero ? std::trunc(scaled) : std::floor(scaled);
  return std::ldexp(whole, static_cast<int>(grid));
}

class TraceOps {
 public:
  using Value = Partial;
  // mixed: the schedule has "@FORMAT" stages; a partial is then rounded into the format of the
  // stage it lands in, as the reference evaluator does (draw for draw).
  TraceOps(const Arithmetic& arithmetic, fp::CounterRng& rounding, bool mixed)
      : base_(arithmetic), arithmetic_(arithmetic), rounding_(rounding), mixed_(mixed) {}

  std::vector<TraceStep> steps;

  // The empty sum: no term, no step (trace_operand_name calls it "0").
  Value zero() { return {{false, SIZE_MAX, 0.0}, 0}; }
  Value finish(const Value& v) {
    if (!mixed_) return v;
    Value rounded = v;
    rounded.operand.value = held(fp::round_double(v.operand.value, arithmetic_.format, options()).value);
    return rounded;
  }
  void set_format(const fp::Format* format, const fp::Format* hold) {
    arithmetic_ = base_;
    if (format) arithmetic_.format = *format;
    hold_ = hold;
  }

  Value add(const Value& x, const Value& y) {
    fp::SuperAccumulator exact;
    exact.add(x.operand.value);
    exact.add(y.operand.value);
    // The reference evaluator's rounding, draw for draw (stochastic rounding advances the stream).
    const double value = held(exact.round(arithmetic_.format, options()).value);
    TraceStep step;
    step.label = "+";
    step.operands = {x.operand, y.operand};
    return record(std::move(step), exact, value, std::max(x.depth, y.depth) + 1);
  }

  Value reduce_whole(const Reducer& r, std::span<const Value> group, uint64_t) {
    if (r.kind == Reducer::Kind::fused) return fused_chain(r, group);
    std::vector<Term> terms;
    fp::SuperAccumulator exact;
    TraceStep step;
    step.kind = TraceStep::Kind::whole_group;
    step.label = to_string(r);
    size_t depth = 0;
    for (const Value& v : group) {
      terms.push_back({v.operand.value});
      exact.add(v.operand.value);
      step.operands.push_back(v.operand);
      depth = std::max(depth, v.depth);
    }
    const double value = reduce_whole_group(r, terms, arithmetic_, rounding_);
    return record(std::move(step), exact, value, depth + 1);
  }

 private:
  // fused_dot's chain, one traced step per chunk of N terms (values enter as value * 1).
  Value fused_chain(const Reducer& r, std::span<const Value> group) {
    const FusedAddSpec spec = fused_reducer_spec(r, arithmetic_);
    const size_t n = static_cast<size_t>(std::max(1, spec.products));
    std::optional<Value> acc;
    for (size_t k = 0; k < group.size(); k += n) {
      const auto chunk = group.subspan(k, std::min(n, group.size() - k));
      std::vector<double> a, ones(chunk.size(), 1.0);
      for (const Value& v : chunk) a.push_back(v.operand.value);
      const double acc_value = acc ? acc->operand.value : 0.0;
      const double value = fused_multiply_add(acc_value, a, ones, spec);

      TraceStep step;
      step.kind = TraceStep::Kind::fused;
      step.label = "fused(" + std::to_string(spec.products) + "," + std::to_string(spec.fraction_bits) + ")";
      size_t depth = acc ? acc->depth : 0;
      if (acc) step.operands.push_back(acc->operand);
      for (const Value& v : chunk) {
        step.operands.push_back(v.operand);
        depth = std::max(depth, v.depth);
      }
      fp::SuperAccumulator exact;
      explain_alignment(step, spec, acc ? std::optional<double>(acc_value) : std::nullopt, a, exact);
      acc = record(std::move(step), exact, value, depth + 1);
    }
    return acc ? *acc : zero();
  }

  // The alignment of fused_multiply_add (sim/tensor_core.hpp, steps 1-3), written out for people:
  // each input converted, its reference exponent, the grid 2^(E - F), what each term keeps.
  // `exact` receives the exact sum of the converted inputs.
  static void explain_alignment(TraceStep& step, const FusedAddSpec& spec, std::optional<double> acc,
                                std::span<const double> values, fp::SuperAccumulator& exact) {
    std::vector<double> inputs;
    std::vector<int64_t> exponents;
    bool special = false;
    auto take = [&](double x, int emin) {
      inputs.push_back(x);
      special |= !std::isfinite(x);
      exponents.push_back(x == 0 || !std::isfinite(x) ? INT64_MIN : std::max<int64_t>(std::ilogb(x), emin));
      exact.add(x);
    };
    if (acc) take(*acc, spec.output.emin());
    for (double x : values) take(fp::round_double(x, spec.input, {spec.input_mode}).value, spec.input.emin());
    if (special) return;
    // The largest reference exponent sets the grid; the accumulator's counts when the model
    // aligns it too, or when every product is zero.
    const size_t first_product = acc ? 1 : 0;
    int64_t largest = *std::max_element(exponents.begin() + first_product, exponents.end());
    if (acc && (spec.accumulator_in_alignment || largest == INT64_MIN)) largest = std::max(largest, exponents[0]);
    if (largest == INT64_MIN) return;  // only zeros
    step.grid_exponent = largest - spec.fraction_bits;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const bool cut = i > 0 || !acc || spec.accumulator_in_alignment;
      const double kept = cut ? cut_to_grid(inputs[i], step.grid_exponent, spec.truncation) : inputs[i];
      step.aligned.push_back(
          {inputs[i], kept, inputs[i] - kept});  // the difference is exact (Sterbenz-like: same grid)
    }
  }

  Value record(TraceStep step, const fp::SuperAccumulator& exact, double value, size_t depth) {
    step.exact_text = exact.decimal_text();
    step.value = value;
    step.depth = depth;
    const fp::ExactValue e = exact.value();
    if (e.kind == fp::ExactValue::Kind::nan || e.kind == fp::ExactValue::Kind::infinite || !std::isfinite(value)) {
      step.error = std::nan("");
      step.error_is_exact = false;
    } else {
      fp::SuperAccumulator difference = exact;
      difference.add(-value);
      const fp::Rounded r = difference.round(fp::fp64(), {});
      step.error = r.value;
      step.error_is_exact = !r.inexact;
    }
    steps.push_back(std::move(step));
    return {{true, steps.size() - 1, value}, depth};
  }

  fp::RoundingOptions options() { return arithmetic_.rounding(&rounding_); }
  // A stage's ">HOLD": the sum, rounded to the stage's format, rounded again where it is held.
  double held(double x) { return hold_ ? fp::round_double(x, *hold_, options()).value : x; }

  const Arithmetic base_;
  Arithmetic arithmetic_;  // the stage's: a "@FORMAT" stage's format, else the arithmetic's
  fp::CounterRng& rounding_;
  const fp::Format* hold_ = nullptr;
  bool mixed_;
};

}  // namespace

ScheduleTrace trace_schedule(const Schedule& schedule, std::span<const double> values, const Arithmetic& arithmetic,
                             const NoiseKey& key, fp::CounterRng& rounding, std::span<const size_t> term_index) {
  if (!term_index.empty() && term_index.size() != values.size())
    throw std::invalid_argument("trace_schedule: term_index and values differ in length");
  TraceOps ops(arithmetic, rounding, schedule.has_stage_formats());
  std::vector<Partial> list;
  list.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    list.push_back({{false, term_index.empty() ? i : term_index[i], values[i]}, 0});
  const Partial result = detail::walk(ops, schedule, std::move(list), key);
  ScheduleTrace trace;
  trace.steps = std::move(ops.steps);
  trace.value = result.operand.value;
  trace.result = result.operand;
  trace.terms = values.size();
  return trace;
}

ScheduleTrace trace_schedule(const Schedule& schedule, std::span<const double> values, const Arithmetic& arithmetic,
                             const NoiseKey& key) {
  fp::CounterRng rounding = key.rounding_stream();
  return trace_schedule(schedule, values, arithmetic, key, rounding);
}

std::string trace_operand_name(const TraceOperand& operand) {
  if (!operand.is_step && operand.index == SIZE_MAX) return "0";
  return (operand.is_step ? "s" : "t") + std::to_string(operand.is_step ? operand.index + 1 : operand.index);
}

}  // namespace fplab::sim
