// fp32 GEMM 512 x 512 x 512 on one thread: fplab's engine under several schedules against
// OpenBLAS sgemm measured in the same run (report GFLOP/s and ratios to OpenBLAS).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <random>
#include <vector>

#include "sim/engine.hpp"

namespace {

constexpr size_t kSize = 512;

struct Matrices {
  std::vector<float> a, b, c;
  Matrices() : a(kSize * kSize), b(kSize * kSize), c(kSize * kSize) {
    std::mt19937_64 g(3);
    std::normal_distribution<float> d;
    for (auto& x : a) x = d(g);
    for (auto& x : b) x = d(g);
  }
};
Matrices& matrices() {
  static Matrices m;
  return m;
}

void report(benchmark::State& state) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kSize * kSize * kSize, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

void BM_openblas_sgemm(benchmark::State& state) {
  openblas_set_num_threads(1);
  auto& m = matrices();
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kSize, kSize, kSize, 1.0f, m.a.data(), kSize, m.b.data(),
                kSize, 0.0f, m.c.data(), kSize);
    benchmark::ClobberMemory();
  }
  report(state);
}

void BM_fplab_gemm(benchmark::State& state, const char* schedule_text) {
  auto& m = matrices();
  const auto schedule = fplab::sim::parse_schedule(schedule_text);
  const fplab::sim::Arithmetic arithmetic;  // fp32, rne, FMA
  uint64_t call = 0;
  for (auto _ : state) {
    fplab::sim::gemm(schedule, m.a.data(), m.b.data(), m.c.data(), {kSize, kSize, kSize}, arithmetic, {1, 0, call++});
    benchmark::ClobberMemory();
  }
  report(state);
}

}  // namespace

BENCHMARK(BM_openblas_sgemm)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, seq_fma_chain, "all:seq")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, warp_tree, "strided(32):seq | all:shfl_down")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, splitk4_atomic, "splitk-atomic(4)")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, exact, "exact")->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
