// Exact (correctly rounded) fp32 dot product against the plain ordered fp32 FMA dot, n = 10^6,
// one thread. The ordered dot is latency-bound (each FMA waits for the previous one); the
// exact dot has no such chain, so it can be the faster of the two.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "fp/exact_dot.hpp"

namespace {

struct Data {
  std::vector<float> a, b;
  explicit Data(size_t n) : a(n), b(n) {
    std::mt19937_64 g(42);
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (size_t i = 0; i < n; ++i) {
      a[i] = d(g);
      b[i] = d(g);
    }
  }
};
const Data& data() {
  static const Data d(1'000'000);
  return d;
}

void BM_sequential_fp32_fma_dot(benchmark::State& state) {
  const auto& d = data();
  for (auto _ : state) {
    float acc = 0.0f;
    for (size_t i = 0; i < d.a.size(); ++i) acc = std::fma(d.a[i], d.b[i], acc);
    benchmark::DoNotOptimize(acc);
  }
  state.counters["ns_per_element"] = benchmark::Counter(
      static_cast<double>(d.a.size()), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_exact_fp32_dot_rounded_to_fp32(benchmark::State& state) {
  const auto& d = data();
  const auto format = fplab::fp::fp32();
  for (auto _ : state) {
    auto r = fplab::fp::exact_dot(d.a.data(), d.b.data(), d.a.size(), format, {});
    benchmark::DoNotOptimize(r);
  }
  state.counters["ns_per_element"] = benchmark::Counter(
      static_cast<double>(d.a.size()), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

}  // namespace

BENCHMARK(BM_sequential_fp32_fma_dot)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_exact_fp32_dot_rounded_to_fp32)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
