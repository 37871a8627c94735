// The trace of a reduction (sim/schedule_trace.hpp) against the evaluators it explains: its result
// is sim::reduce's bit for bit, every step's rounded value is its exact result rounded once, the
// dropped errors add back up to the exact sum, and a fused step's aligned terms rebuild its result.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <random>

#include "fp/arithmetic.hpp"
#include "fp/round.hpp"
#include "fp/superaccumulator.hpp"
#include "sim/engine.hpp"
#include "sim/schedule_trace.hpp"
#include "sim/tensor_core.hpp"
#include "sim/whole_group.hpp"
#include "tests/same_bits.hpp"

using namespace fplab;
using namespace fplab::sim;
using fplab::test::same_bits;

namespace {

std::vector<double> data_in(const fp::Format& f, size_t n, std::mt19937_64& g) {
  std::normal_distribution<double> d;
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = d(g) * std::exp2(std::floor(d(g) * 4));
    if (i > 0 && g() % 6 == 0) v[i] = -v[i - 1];  // exact cancellations
    v[i] = fp::round_double(v[i], f, {}).value;
  }
  return v;
}

Arithmetic arithmetic(const fp::Format& f, fp::Mode m) {
  Arithmetic a;
  a.format = f;
  a.mode = m;
  return a;
}

// The value an operand names: a term of the data, or an earlier step's result.
double operand_source(const ScheduleTrace& t, const TraceOperand& o, std::span<const double> terms) {
  return o.is_step ? t.steps.at(o.index).value : terms[o.index];
}

const char* const kSchedules[] = {"all:seq",
                                  "all:rev",
                                  "all:tree",
                                  "all:shfl_down",
                                  "all:atomic",
                                  "numpy",
                                  "strided(32):seq | all:shfl_down",
                                  "split(4):seq | all:seq",
                                  "contig(8):kahan | all:neumaier",
                                  "contig(5):exact | all:binned",
                                  "shuffle | contig(3):seq | all:tree",
                                  "all:fused(4,23)",
                                  "contig(16):fused(8,25,tf32) | all:seq",
                                  "tc-h100-fp16",
                                  "cuda-naive-sum(32,2)"};

}  // namespace

TEST_CASE("trace value == sim::reduce bit for bit: schedules x formats x modes (sr included) x K") {
  std::mt19937_64 g(5);
  const std::pair<fp::Format, fp::Mode> arithmetics[] = {{fp::fp32(), fp::Mode::rne}, {fp::bf16(), fp::Mode::rne},
                                                         {fp::fp16(), fp::Mode::sr},  {fp::e4m3(), fp::Mode::rz},
                                                         {fp::fp64(), fp::Mode::rne}, {fp::fp32(), fp::Mode::ru}};
  for (const char* text : kSchedules) {
    const Schedule s = parse_schedule(text);
    for (const auto& [f, m] : arithmetics) {
      const bool fused = std::string_view(text).find("fused") != std::string_view::npos || text[0] == 't';
      if (m == fp::Mode::sr && fused) continue;  // tensor cores do not round stochastically
      for (size_t k : {1, 2, 3, 8, 33, 100}) {
        const auto v = data_in(f, k, g);
        const NoiseKey key{g() % 100, 1, 2, 0, 0};
        const ScheduleTrace t = trace_schedule(s, v, arithmetic(f, m), key);
        INFO(text << " " << f.name << " " << fp::mode_name(m) << " K=" << k);
        REQUIRE(same_bits(t.value, reduce(s, v, arithmetic(f, m), key)));
        REQUIRE(t.terms == k);
        // Each operand is what it names, and the result is the last step's (or the lone term).
        for (const auto& step : t.steps)
          for (const auto& o : step.operands) REQUIRE(same_bits(o.value, operand_source(t, o, v)));
        REQUIRE(same_bits(t.value, operand_source(t, t.result, v)));
        if (k > 1) REQUIRE(!t.steps.empty());
      }
    }
  }
}

TEST_CASE("every traced addition is its exact result rounded once, and the errors add up to the exact sum") {
  std::mt19937_64 g(9);
  for (const char* text : {"all:seq", "all:tree", "numpy", "strided(32):seq | all:shfl_down", "all:atomic"})
    for (auto [f, m] : {std::pair{fp::fp32(), fp::Mode::rne}, {fp::bf16(), fp::Mode::rz}, {fp::e5m2(), fp::Mode::rne}})
      for (size_t k : {2, 9, 64, 300}) {
        const auto v = data_in(f, k, g);
        const ScheduleTrace t = trace_schedule(parse_schedule(text), v, arithmetic(f, m), {3});
        INFO(text << " " << f.name << " K=" << k);
        REQUIRE(t.steps.size() == k - 1);
        fp::SuperAccumulator balance;  // sum of terms - result - sum of dropped errors: must be 0
        for (double x : v) balance.add(x);
        balance.add(-t.value);
        bool finite = std::isfinite(t.value);
        for (const auto& step : t.steps) {
          REQUIRE(step.kind == TraceStep::Kind::addition);
          REQUIRE(step.operands.size() == 2);
          const double expected = fp::add(step.operands[0].value, step.operands[1].value, f, {m});
          REQUIRE(same_bits(step.value, expected));
          fp::SuperAccumulator exact;
          exact.add(step.operands[0].value);
          exact.add(step.operands[1].value);
          REQUIRE(step.exact_text == exact.decimal_text());
          finite &= std::isfinite(step.value);
          if (std::isfinite(step.value)) {
            REQUIRE(step.error_is_exact);  // the error of one addition of fp32-or-narrower values fits a double
            REQUIRE(same_bits(step.error, fp::add(step.operands[0].value - step.value, step.operands[1].value,
                                                  fp::fp64(), {})));
            balance.add(-step.error);
          }
        }
        if (finite) REQUIRE(balance.decimal_text() == "0");
      }
}

TEST_CASE("a fused step's aligned terms: input = kept + dropped, kept on the grid, their sum rounds to the step") {
  std::mt19937_64 g(13);
  for (const char* text : {"all:fused(4,23)", "all:fused(16,25,tf32)", "all:fused(8,3)", "tc-h100-fp16",
                           "contig(16):fused(8,25,bf16) | all:seq"})
    for (auto f : {fp::fp32(), fp::fp16()})
      for (size_t k : {1, 5, 16, 40}) {
        const Schedule s = parse_schedule(text);
        const Arithmetic ar = arithmetic(f, fp::Mode::rne);
        const auto v = data_in(f, k, g);
        const ScheduleTrace t = trace_schedule(s, v, ar, {});
        INFO(text << " " << f.name << " K=" << k);
        size_t fused = 0;
        for (const auto& step : t.steps) {
          if (step.kind != TraceStep::Kind::fused) continue;
          ++fused;
          const FusedAddSpec spec = fused_reducer_spec(s.stages.front().reducer, ar);
          REQUIRE(step.aligned.size() == step.operands.size());
          fp::SuperAccumulator kept;
          for (const auto& a : step.aligned) {
            REQUIRE(a.kept + a.dropped == a.input);
            REQUIRE(std::fabs(a.dropped) < std::ldexp(1.0, static_cast<int>(step.grid_exponent)));
            const double scaled = std::ldexp(a.kept, static_cast<int>(-step.grid_exponent));
            REQUIRE(scaled == std::trunc(scaled));
            kept.add(a.kept);
          }
          REQUIRE(same_bits(kept.round(spec.output, {spec.output_mode}).value, step.value));
        }
        REQUIRE(fused > 0);
      }
}

TEST_CASE("the classic example: 1e8 + 1 - 1e8 + 1 in fp32, left to right, drops the first 1") {
  const std::vector<double> v = {1e8, 1, -1e8, 1};
  const ScheduleTrace t = trace_schedule(parse_schedule("all:seq"), v, arithmetic(fp::fp32(), fp::Mode::rne), {});
  REQUIRE(t.steps.size() == 3);
  REQUIRE(t.steps[0].exact_text == "100000001");
  REQUIRE(t.steps[0].value == 1e8);
  REQUIRE(t.steps[0].error == 1);
  REQUIRE(trace_operand_name(t.steps[1].operands[0]) == "s1");
  REQUIRE(trace_operand_name(t.steps[1].operands[1]) == "t2");
  REQUIRE(t.steps[1].value == 0);
  REQUIRE(t.steps[2].value == 1);
  REQUIRE(t.value == 1);
  REQUIRE(t.steps[2].depth == 3);
}

TEST_CASE("term_index names permuted data by the caller's positions; the rounding stream is the caller's") {
  const std::vector<double> v = {3, 0x1p-40, 2};  // inexact in fp32: stochastic rounding draws
  const std::vector<size_t> index = {2, 0, 1};
  fp::CounterRng stream(42);
  const ScheduleTrace t =
      trace_schedule(parse_schedule("all:seq"), v, arithmetic(fp::fp32(), fp::Mode::sr), {}, stream, index);
  REQUIRE(trace_operand_name(t.steps[0].operands[0]) == "t2");
  REQUIRE(trace_operand_name(t.steps[0].operands[1]) == "t0");
  fp::CounterRng fresh(42);
  REQUIRE(stream.next() != fresh.next());  // the trace drew from the caller's stream
  REQUIRE_THROWS(trace_schedule(parse_schedule("all:seq"), v, arithmetic(fp::fp32(), fp::Mode::rne), {}, stream,
                                std::vector<size_t>{0}));
}
