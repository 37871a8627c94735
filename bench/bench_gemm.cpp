// fp32 GEMM 512 x 512 x 512 on one thread: fplab's engine under several schedules against
// OpenBLAS sgemm measured in the same run (report GFLOP/s and ratios to OpenBLAS, and of the
// other schedules to the seq FMA chain). reference_* is the per-output reference evaluator that
// sim::gemm fell back to for those schedules before the product-term path (one iteration).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <random>
#include <vector>

#include "fp/format.hpp"
#include "sim/engine.hpp"
#include "sim/narrow_chain_tile.hpp"
#include "sim/reference_evaluator.hpp"

namespace {

using fplab::sim::detail::NarrowChainGrid;

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
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * kSize * kSize * kSize, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
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

void BM_reference_gemm(benchmark::State& state, const char* schedule_text) {
  auto& m = matrices();
  const auto schedule = fplab::sim::parse_schedule(schedule_text);
  const fplab::sim::Arithmetic arithmetic;
  const std::vector<double> a(m.a.begin(), m.a.end()), b(m.b.begin(), m.b.end());
  std::vector<double> c(kSize * kSize);
  for (auto _ : state) {
    fplab::sim::gemm_reference(schedule, a.data(), b.data(), c.data(), {kSize, kSize, kSize}, arithmetic, {1});
    benchmark::ClobberMemory();
  }
  report(state);
}

// all:seq accumulated in a narrow format (sim/narrow_chain_tile.cpp), on B ~ N(0, 1), whose chains
// stay in the format's normal range, and on B times `scale`, whose chains stay below the format's
// least normal: on the cut's scaled grid those values are fp32 subnormals, which Intel cores
// compute through microcode assists (bench/RESULTS.md, "subnormal assists"). Each on the grid
// the host picks and on both grids (sim::detail::NarrowChainGrid; bf16 has none to pick). Compare
// with seq_fma_chain (fp32) in the same run.
void BM_narrow_chains(benchmark::State& state, const char* format, float scale, NarrowChainGrid grid) {
  fplab::sim::detail::set_narrow_chain_grid(grid);
  auto& m = matrices();
  std::vector<float> b(m.b);
  for (auto& x : b) x *= scale;
  const auto schedule = fplab::sim::parse_schedule("all:seq");
  fplab::sim::Arithmetic arithmetic;
  arithmetic.format = fplab::fp::parse_format(format);
  uint64_t call = 0;
  for (auto _ : state) {
    fplab::sim::gemm(schedule, m.a.data(), b.data(), m.c.data(), {kSize, kSize, kSize}, arithmetic, {1, 0, call++});
    benchmark::ClobberMemory();
  }
  fplab::sim::detail::set_narrow_chain_grid(NarrowChainGrid::host);
  report(state);
}

// The exact GEMM on the shapes of a small_cnn training step (batch 64) with a made-up share of
// zeros in A and B, as ReLU and max-pool leave them: the forward pass (activations x weights), the
// input gradient (a mostly-zero gradient x weights) and the weight gradient (activations^T x a
// mostly-zero gradient).
void BM_exact_gemm_shape(benchmark::State& state) {
  const auto m = static_cast<size_t>(state.range(0)), n = static_cast<size_t>(state.range(1)),
             k = static_cast<size_t>(state.range(2));
  const double a_zeros = static_cast<double>(state.range(3)) / 100, b_zeros = static_cast<double>(state.range(4)) / 100;
  std::mt19937_64 g(5);
  std::normal_distribution<float> d;
  std::uniform_real_distribution<double> u;
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (auto& x : a) x = u(g) < a_zeros ? 0.0f : d(g);
  for (auto& x : b) x = u(g) < b_zeros ? 0.0f : d(g);
  const auto schedule = fplab::sim::parse_schedule("exact");
  fplab::sim::Arithmetic arithmetic;
  arithmetic.products = fplab::sim::Products::exact;
  for (auto _ : state) {
    fplab::sim::gemm(schedule, a.data(), b.data(), c.data(), {m, n, k}, arithmetic, {1});
    benchmark::ClobberMemory();
  }
  state.counters["ns/product"] = benchmark::Counter(
      static_cast<double>(m * n * k), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

}  // namespace

BENCHMARK(BM_exact_gemm_shape)
    ->ArgNames({"m", "n", "k", "a0%", "b0%"})
    ->Args({50176, 16, 9, 10, 0})     // conv1 forward
    ->Args({12544, 32, 144, 50, 0})   // conv2 forward
    ->Args({12544, 144, 32, 80, 0})   // conv2 input gradient
    ->Args({144, 32, 12544, 50, 85})  // conv2 weight gradient
    ->Args({9, 16, 50176, 5, 85})     // conv1 weight gradient
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_openblas_sgemm)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, seq_fma_chain, "all:seq")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, warp_tree, "strided(32):seq | all:shfl_down")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, splitk4_atomic, "splitk-atomic(4)")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, exact, "exact")->Unit(benchmark::kMillisecond);
// First stages that are not FMA chains: tensor-core steps (tc-h100-tf32, its split-K weight
// gradient, tc-h100-bf16, tc-a100) and the other reducers on exact/fused products.
BENCHMARK_CAPTURE(BM_fplab_gemm, tc_h100_tf32, "all:fused(8,25)")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, tc_h100_tf32_splitk16, "split(16):fused(8,25) | all:seq")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, tc_h100_bf16, "all:fused(16,25)")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, tc_a100, "all:fused(8,24)")->Unit(benchmark::kMillisecond);
// The same with the factors converted to the tensor core's input format, as the hardware profiles
// do since 2026-11-23 (tf32 truncated, bf16 to nearest; sim/fp32_narrowing.hpp).
BENCHMARK_CAPTURE(BM_fplab_gemm, tc_h100_tf32_inputs, "all:fused(8,25,tf32)")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, tc_h100_tf32_inputs_splitk16, "split(16):fused(8,25,tf32) | all:seq")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, tc_h100_bf16_inputs, "all:fused(16,25,bf16)")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, tc_a100_fp16_inputs, "all:fused(8,24,fp16)")->Unit(benchmark::kMillisecond);
// Every tensor-core preset (sim/tensor_core_models.cpp), as the hardware profiles run them, and e5m2.
BENCHMARK_CAPTURE(BM_fplab_gemm, preset_tc_v100, "tc-v100")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, preset_tc_turing_unconverted, "tc-turing-unconverted")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, preset_tc_a100, "tc-a100")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, preset_tc_a100_bf16, "tc-a100-bf16")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, preset_tc_a100_tf32, "tc-a100-tf32")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, preset_tc_h100_tf32, "tc-h100-tf32")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, preset_tc_h100_tf32_rne, "tc-h100-tf32-rne")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, preset_tc_h100_tf32_rna, "tc-h100-tf32-rna")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, preset_tc_h100_bf16, "tc-h100-bf16")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, preset_tc_h100_fp16, "tc-h100-fp16")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, preset_tc_h100_fp8, "tc-h100-fp8")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, tc_h100_fp8_e5m2, "all:fused(32,13,e5m2)")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, pairwise_tree, "all:tree")->Unit(benchmark::kMillisecond);
// Chains of about 22 in magnitude; times 2^-20 (fp16) or 2^-12 (e4m3) below the least normal.
BENCHMARK_CAPTURE(BM_narrow_chains, bf16_normal, "bf16", 1.0f, NarrowChainGrid::host)->Unit(benchmark::kMillisecond);
#define NARROW_CHAINS(name, format, scale)                                                                        \
  BENCHMARK_CAPTURE(BM_narrow_chains, name, format, scale, NarrowChainGrid::host)->Unit(benchmark::kMillisecond); \
  BENCHMARK_CAPTURE(BM_narrow_chains, name##_scaled_grid, format, scale, NarrowChainGrid::scaled)                 \
      ->Unit(benchmark::kMillisecond);                                                                            \
  BENCHMARK_CAPTURE(BM_narrow_chains, name##_subnormal_grid, format, scale, NarrowChainGrid::subnormal)           \
      ->Unit(benchmark::kMillisecond)
NARROW_CHAINS(fp16_normal, "fp16", 1.0f);
NARROW_CHAINS(fp16_subnormal, "fp16", 0x1p-20f);
NARROW_CHAINS(e4m3_normal, "e4m3", 1.0f);
NARROW_CHAINS(e4m3_subnormal, "e4m3", 0x1p-12f);
#undef NARROW_CHAINS
BENCHMARK_CAPTURE(BM_fplab_gemm, rev, "all:rev")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, shfl_down, "all:shfl_down")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, shfl_up, "all:shfl_up")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, shfl_xor, "all:shfl_xor")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, contig32_tree_then_seq, "contig(32):tree | all:seq")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, kahan, "all:kahan")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_fplab_gemm, neumaier, "all:neumaier")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_reference_gemm, tc_h100_tf32, "all:fused(8,25)")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_reference_gemm, pairwise_tree, "all:tree")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_MAIN();
