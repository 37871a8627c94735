// Rounding throughput: fp32 values rounded to bf16, fp16 and e4m3 in rne and sr.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "fp/round.hpp"

namespace {

const std::vector<float>& inputs() {
  static const std::vector<float> v = [] {
    std::vector<float> x(1 << 16);
    std::mt19937_64 g(7);
    std::normal_distribution<float> d(0.0f, 4.0f);
    for (auto& e : x) e = d(g);
    return x;
  }();
  return v;
}

void BM_round_fp32_to(benchmark::State& state, fplab::fp::Format format, fplab::fp::Mode mode) {
  const auto& x = inputs();
  fplab::fp::CounterRng stream(1);
  const fplab::fp::RoundingOptions options{mode, false, false, &stream};
  for (auto _ : state) {
    for (float v : x) benchmark::DoNotOptimize(fplab::fp::round_double(v, format, options).bits);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * x.size()));
}

}  // namespace

using fplab::fp::Mode;
BENCHMARK_CAPTURE(BM_round_fp32_to, bf16_rne, fplab::fp::bf16(), Mode::rne);
BENCHMARK_CAPTURE(BM_round_fp32_to, bf16_sr, fplab::fp::bf16(), Mode::sr);
BENCHMARK_CAPTURE(BM_round_fp32_to, fp16_rne, fplab::fp::fp16(), Mode::rne);
BENCHMARK_CAPTURE(BM_round_fp32_to, fp16_sr, fplab::fp::fp16(), Mode::sr);
BENCHMARK_CAPTURE(BM_round_fp32_to, e4m3_rne, fplab::fp::e4m3(), Mode::rne);
BENCHMARK_CAPTURE(BM_round_fp32_to, e4m3_sr, fplab::fp::e4m3(), Mode::sr);
BENCHMARK_MAIN();
