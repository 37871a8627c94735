// Long single reductions (10^7 fp32 terms) per schedule family, in ns per term.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "sim/engine.hpp"

namespace {

const std::vector<double>& terms() {
  static const std::vector<double> v = [] {
    std::vector<double> x(10'000'000);
    std::mt19937_64 g(5);
    std::normal_distribution<float> d;
    for (auto& e : x) e = d(g);
    return x;
  }();
  return v;
}

void BM_reduce(benchmark::State& state, const char* schedule_text) {
  const auto schedule = fplab::sim::parse_schedule(schedule_text);
  const fplab::sim::Arithmetic arithmetic;
  const auto& v = terms();
  for (auto _ : state) benchmark::DoNotOptimize(fplab::sim::reduce(schedule, v, arithmetic, {1}));
  state.counters["ns_per_term"] = benchmark::Counter(
      static_cast<double>(v.size()), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

}  // namespace

BENCHMARK_CAPTURE(BM_reduce, seq, "seq")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_reduce, pairwise, "pairwise")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_reduce, numpy, "numpy")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_reduce, warp_tree, "strided(32):seq | all:shfl_down")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_reduce, cuda_naive, "cuda-naive-sum(256,1024)")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_reduce, splitk_atomic, "splitk-atomic(64)")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_reduce, kahan, "kahan")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_reduce, exact, "exact")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_reduce, binned, "binned")->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
