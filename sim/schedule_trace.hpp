// A reduction traced step by step: every rounding operation of a schedule, in the order it runs,
// with its operands, the exact result, the rounded result and the error the rounding dropped.
// What `fplab sum --trace`, `fplab reduce --trace` and the teaching page (fplab serve) show.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fp/counter_rng.hpp"
#include "sim/arithmetic.hpp"
#include "sim/noise.hpp"
#include "sim/schedule.hpp"

namespace fplab::sim {

// An operand: input term `index` (its position in the caller's data), or the result of an
// earlier step `index` (0-based, in the order steps ran).
struct TraceOperand {
  bool is_step = false;
  size_t index = 0;
  double value = 0;  // as the operation reads it
  bool operator==(const TraceOperand&) const = default;
};

// A fused (tensor-core) step's term after alignment: the input converted to the step's input
// format, the part kept on the grid 2^grid_exponent, and the bits cut below it (input = kept +
// dropped, exactly).
struct AlignedTerm {
  double input = 0, kept = 0, dropped = 0;
};

struct TraceStep {
  enum class Kind { addition, fused, whole_group };
  Kind kind = Kind::addition;
  std::string label;                  // "+", "fused(4,23)", "kahan", ...
  std::vector<TraceOperand> operands;  // fused: the accumulator first, when the step has one
  std::string exact_text;             // exact sum of the operands as read (fused: of the converted inputs), every digit
  double value = 0;                   // the rounded result, as the evaluator gives it
  // exact - value, rounded once to a double (error_is_exact says whether that lost nothing);
  // NaN when the exact result is not finite or the value overflowed.
  double error = 0;
  bool error_is_exact = true;
  // fused steps: the grid and the aligned terms, the accumulator first (empty when a term is
  // infinite or NaN: no alignment happens then).
  int64_t grid_exponent = 0;
  std::vector<AlignedTerm> aligned;
  size_t depth = 0;  // roundings on the longest path from a term to this result
};

struct ScheduleTrace {
  std::vector<TraceStep> steps;
  double value = 0;              // the reduction's result: bit for bit sim::reduce's
  TraceOperand result;           // a term when no operation ran (one term), else the last step
  size_t terms = 0;
};

// The trace of reducing `values` under the schedule and arithmetic. `rounding` feeds stochastic
// rounding and is advanced as the evaluator advances it (pass key.rounding_stream() to match
// sim::reduce with that key; atomic and shuffle orders come from `key`). `term_index[i]` names
// values[i] in the operands (the data's own positions when the caller permuted it); empty:
// value i is term i.
ScheduleTrace trace_schedule(const Schedule& schedule, std::span<const double> values, const Arithmetic& arithmetic,
                             const NoiseKey& key, fp::CounterRng& rounding, std::span<const size_t> term_index = {});
ScheduleTrace trace_schedule(const Schedule& schedule, std::span<const double> values, const Arithmetic& arithmetic,
                             const NoiseKey& key = {});

// Operand names for people: "t3" for term 3, "s2" for the result of step 2 (1-based, as printed).
std::string trace_operand_name(const TraceOperand& operand);

}  // namespace fplab::sim
