// Exact sum of 10^6 doubles, rounded once to fp64, against the naive ordered sum (s += x[i],
// latency-bound) and, where bench/fetch_xsum.py has fetched it, xsum's large and small
// accumulators, all in one run. Three data sets: normal(0, 1), "wide" (random signs, exponents
// uniform over 2^-300 .. 2^300, so the buckets of 600 exponents are in use), and "relu" (the
// normal set with its negative terms zero, as after a ReLU: a narrow band of exponents and
// zeros, whose exponent field 0 stretches the range a chunk's exponents span).
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "fp/exact_sum.hpp"
#include "fp/superaccumulator.hpp"

#ifdef FPLAB_HAVE_XSUM
#include <xsum.hpp>
#endif

namespace {

constexpr size_t kTerms = 1'000'000;

const std::vector<double>& data(int64_t kind) {
  static const std::vector<double> normal = [] {
    std::vector<double> x(kTerms);
    std::mt19937_64 g(42);
    std::normal_distribution<double> d;
    for (auto& v : x) v = d(g);
    return x;
  }();
  static const std::vector<double> wide = [] {
    std::vector<double> x(kTerms);
    std::mt19937_64 g(43);
    std::uniform_real_distribution<double> significand(1.0, 2.0);
    std::uniform_int_distribution<int> exponent(-300, 300);
    for (auto& v : x) v = std::ldexp(g() & 1 ? -significand(g) : significand(g), exponent(g));
    return x;
  }();
  static const std::vector<double> relu = [] {
    std::vector<double> x = normal;
    for (auto& v : x) v = v < 0 ? 0.0 : v;
    return x;
  }();
  return kind == 0 ? normal : kind == 1 ? wide : relu;
}

void per_term(benchmark::State& state) {
  state.SetLabel(state.range(0) == 0 ? "normal" : state.range(0) == 1 ? "wide" : "relu");
  state.counters["ns_per_term"] = benchmark::Counter(static_cast<double>(kTerms),
                                                     benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}

void BM_naive_ordered_sum(benchmark::State& state) {
  const auto& x = data(state.range(0));
  for (auto _ : state) {
    double s = 0;
    for (double v : x) s += v;
    benchmark::DoNotOptimize(s);
  }
  per_term(state);
}

void BM_superaccumulator_term_by_term(benchmark::State& state) {
  const auto& x = data(state.range(0));
  for (auto _ : state) {
    fplab::fp::SuperAccumulator acc;
    for (double v : x) acc.add(v);
    benchmark::DoNotOptimize(acc.round(fplab::fp::fp64(), {}).value);
  }
  per_term(state);
}

void BM_exact_sum_of(benchmark::State& state) {
  const auto& x = data(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(fplab::fp::exact_sum_of(x, fplab::fp::fp64(), {}).value);
  per_term(state);
}

#ifdef FPLAB_HAVE_XSUM
void BM_xsum_large(benchmark::State& state) {
  const auto& x = data(state.range(0));
  for (auto _ : state) {
    xsum::xsum_large acc;
    acc.add(x.data(), static_cast<xsum::xsum_length>(x.size()));
    benchmark::DoNotOptimize(acc.round());
  }
  per_term(state);
}

void BM_xsum_small(benchmark::State& state) {
  const auto& x = data(state.range(0));
  for (auto _ : state) {
    xsum::xsum_small acc;
    acc.add(x.data(), static_cast<xsum::xsum_length>(x.size()));
    benchmark::DoNotOptimize(acc.round());
  }
  per_term(state);
}
#endif

}  // namespace

BENCHMARK(BM_naive_ordered_sum)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_superaccumulator_term_by_term)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_exact_sum_of)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
#ifdef FPLAB_HAVE_XSUM
BENCHMARK(BM_xsum_large)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_xsum_small)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
#endif
BENCHMARK_MAIN();
