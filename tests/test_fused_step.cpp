// sim/cuda/fused_step.hpp, the tensor-core GEMM's software fused step (its redo path on the GPU),
// compiled for the host and held to sim::fused_multiply_add bit for bit: tf32, bf16 and fp16
// factors, 1..N products, on ordinary data and on data where the tensor cores and the model part
// (sums past 2^128, negative sums below 2^-149, zeros of both signs, infinities, NaNs,
// subnormal factors and accumulators). Runs everywhere: no GPU needed.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>

#include "fp/format.hpp"
#include "fp/round.hpp"
#include "sim/cuda/fused_grid_step.hpp"
#include "sim/cuda/fused_step.hpp"
#include "sim/tensor_core.hpp"

using namespace fplab;

namespace {

struct Range {
  const char* what;
  int lo, hi;
  double zeros, specials;
  int y_shift = 0;  // y's exponents: x's range moved by this much
};

// Steps of N products on data of every range above: `format` the factors' values, `model_input`
// the format the model holds them in (fp64 for factors taken as they are, sim::fused_input_conversion's
// `none`), `format` when null. For each, check(acc, x, y, count, want) with want from
// sim::fused_multiply_add; check returns false after a failed CHECK, which ends the run. The
// number of steps checked.
template <int N, class Check>
size_t for_each_step(const fp::Format& format, fp::Mode input_mode, uint64_t seed, int fraction_bits,
                     const fp::Format* model_input, Check check) {
  sim::FusedAddSpec spec;
  spec.products = N;
  spec.fraction_bits = fraction_bits;
  spec.input = model_input ? *model_input : format;
  spec.input_mode = input_mode;
  spec.output = fp::fp32();
  spec.output_mode = fp::Mode::rz;
  const Range ranges[] = {{"ordinary", -3, 3, 0, 0},          {"past 2^128", 56, 64, 0, 0},
                          {"below 2^-149", -82, -70, 0.1, 0}, {"zeros", -3, 3, 0.5, 0},
                          {"wide", -150, 127, 0.1, 0.01},     {"specials", -3, 3, 0.1, 0.05},
                          {"subnormal", -145, -120, 0.1, 0},
                          // a subnormal factor whose product is the step's largest: its reference exponent sets the grid
                          {"subnormal times large", -148, -127, 0.0, 0, 230}};
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> share;
  size_t checked = 0;
  for (const Range& r : ranges) {
    std::uniform_int_distribution<int> exponent(r.lo, r.hi);
    auto value = [&](bool in_format, int shift = 0) {
      const double u = share(rng);
      double x;
      if (u < r.zeros)
        x = share(rng) < 0.5 ? 0.0 : -0.0;
      else if (u < r.zeros + r.specials)
        x = share(rng) < 0.5 ? std::numeric_limits<double>::quiet_NaN() : (share(rng) < 0.5 ? INFINITY : -INFINITY);
      else
        x = std::ldexp(normal(rng), exponent(rng) + shift);
      const fp::Format& to = in_format ? format : fp::fp32();
      return static_cast<float>(fp::round_double(x, to, {in_format ? input_mode : fp::Mode::rne}).value);
    };
    for (int trial = 0; trial < 20000; ++trial) {
      const int count = 1 + static_cast<int>(share(rng) * N);
      float x[N] = {}, y[N] = {};
      double xd[N], yd[N];
      for (int i = 0; i < count; ++i) {
        x[i] = value(true), y[i] = value(true, r.y_shift);
        xd[i] = x[i], yd[i] = y[i];
      }
      float acc = value(false);
      if (share(rng) < 0.1) acc = share(rng) < 0.5 ? 0.0f : -0.0f;
      if (share(rng) < 0.05) acc = std::ldexp(static_cast<float>(normal(rng)), -140);  // subnormal
      const auto want = static_cast<float>(sim::fused_multiply_add(
          acc, std::span<const double>(xd, count), std::span<const double>(yd, count), spec));
      if (!check(acc, x, y, count, want, r.what)) return checked;
      ++checked;
    }
  }
  return checked;
}

constexpr size_t kSteps = 8 * 20000;  // every range's trials

std::string step_text(float acc, const float* x, const float* y, int count) {
  std::string text = "acc " + std::to_string(acc) + ", products";
  for (int i = 0; i < count; ++i) text += " " + std::to_string(x[i]) + "*" + std::to_string(y[i]);
  return text;
}

template <int N>
void check_format(const fp::Format& format, fp::Mode input_mode, int emin, uint64_t seed, int fraction_bits = 25,
                  const fp::Format* model_input = nullptr) {
  const size_t checked = for_each_step<N>(
      format, input_mode, seed, fraction_bits, model_input,
      [&](float acc, const float(&x)[N], const float(&y)[N], int count, float want, const char* what) {
        const float got = sim::gpu::fused_step<N>(acc, x, y, count, emin, fraction_bits);
        if (std::bit_cast<uint32_t>(want) == std::bit_cast<uint32_t>(got)) return true;
        INFO(format.name << " F=" << fraction_bits << " " << what << ": " << step_text(acc, x, y, count));
        CHECK(std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want));
        return false;
      });
  CHECK(checked == kSteps);
}

// The grid form (fused_grid_step.hpp) in value type V: where it takes a step, fused_multiply_add's
// bits; it must take most ordinary steps (else the kernel would live on its fallback) and leave
// every step with an infinity or a NaN, and every step of a -0 accumulator and zero products, to
// fused_step.
template <class V, int N>
void check_grid_form(const fp::Format& format, fp::Mode input_mode, int emin, uint64_t seed, int fraction_bits,
                     const fp::Format* model_input = nullptr) {
  namespace grid = sim::gpu::fused_grid;
  size_t taken = 0, ordinary = 0, ordinary_taken = 0;
  const size_t checked = for_each_step<N>(
      format, input_mode, seed, fraction_bits, model_input,
      [&](float acc, const float(&x)[N], const float(&y)[N], int count, float want, const char* what) {
        V xv[N], yv[N];
        int x_code[N], y_code[N];
        bool special = std::isinf(acc) || std::isnan(acc), all_zero = true;
        for (int i = 0; i < N; ++i) {  // past count: zeros, as the kernel stages them
          xv[i] = x[i], yv[i] = y[i];
          x_code[i] = grid::factor_code(x[i], emin), y_code[i] = grid::factor_code(y[i], emin);
          special = special || !std::isfinite(x[i]) || !std::isfinite(y[i]);
          all_zero = all_zero && (x[i] == 0 || y[i] == 0);
        }
        special = special || (acc == 0 && std::signbit(acc) && all_zero);  // fused_step's sign rule
        float got = acc;
        const bool in_form = grid::sum_fits_int32(N, fraction_bits)
                                 ? grid::grid_step<V, int32_t, N>(got, xv, yv, x_code, y_code, fraction_bits)
                                 : grid::grid_step<V, int64_t, N>(got, xv, yv, x_code, y_code, fraction_bits);
        const bool is_ordinary = std::string(what) == "ordinary";
        ordinary += is_ordinary, ordinary_taken += is_ordinary && in_form, taken += in_form;
        INFO(format.name << " F=" << fraction_bits << " " << what << ": " << step_text(acc, x, y, count));
        if (special && in_form) {
          CHECK_FALSE(in_form);
          return false;
        }
        if (!in_form || std::bit_cast<uint32_t>(want) == std::bit_cast<uint32_t>(got)) return true;
        CHECK(std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want));
        return false;
      });
  CHECK(checked == kSteps);
  CHECK(ordinary_taken * 10 >= ordinary * 9);
  CHECK(taken > kSteps / 3);  // ordinary and zeros steps, and a share of the others
}

}  // namespace

TEST_CASE("fused_step == fused_multiply_add: tf32 factors (truncated, and rounded), 8 products") {
  check_format<8>(fp::tf32(), fp::Mode::rz, -126, 1);
  check_format<8>(fp::tf32(), fp::Mode::rne, -126, 2);
}

TEST_CASE("fused_step == fused_multiply_add: bf16 and fp16 factors, 16 products") {
  check_format<16>(fp::bf16(), fp::Mode::rne, -126, 3);
  check_format<16>(fp::fp16(), fp::Mode::rne, -14, 4);
}

TEST_CASE("fused_step == fused_multiply_add: the models no mma instruction runs (N 4 or 8, F 23 or 24, fp32)") {
  check_format<4>(fp::fp16(), fp::Mode::rne, -14, 5, 23);   // tc-v100
  check_format<4>(fp::tf32(), fp::Mode::rz, -126, 6, 24);   // tc-a100-tf32
  check_format<8>(fp::fp16(), fp::Mode::rne, -14, 7, 24);   // tc-a100
  check_format<8>(fp::bf16(), fp::Mode::rne, -126, 8, 24);  // tc-a100-bf16
  // tc-turing-unconverted: fp32 factors as they are, which the model holds in fp64 (emin -149 on the GPU)
  const fp::Format held = fp::fp64();
  check_format<4>(fp::fp32(), fp::Mode::rne, -149, 9, 23, &held);
  check_format<16>(fp::fp32(), fp::Mode::rne, -149, 10, 0, &held);  // the coarsest grid
}

TEST_CASE("fused_step: the cases the tensor cores give otherwise") {
  const float big[8] = {0x1p64f, 0x1p64f, 0, 0, 0, 0, 0, 0}, one[8] = {0x1p63f, 0x1p63f, 0, 0, 0, 0, 0, 0};
  // 2^127 + 2^127 = 2^128: FLT_MAX toward zero (the chip: inf)
  CHECK(sim::gpu::fused_step<8>(0.0f, big, one, 2, -126) == std::numeric_limits<float>::max());
  const float tiny[8] = {-0x1p-75f}, small[8] = {0x1p-75f};
  // -2^-150 cut to fp32 toward zero: -0 (the chip: +0)
  CHECK(std::bit_cast<uint32_t>(sim::gpu::fused_step<8>(0.0f, tiny, small, 1, -126)) == 0x80000000u);
  const float zero[8] = {-0.0f}, pos[8] = {1.0f};
  CHECK(std::bit_cast<uint32_t>(sim::gpu::fused_step<8>(-0.0f, zero, pos, 1, -126)) == 0x80000000u);
  CHECK(std::bit_cast<uint32_t>(sim::gpu::fused_step<8>(0.0f, zero, pos, 1, -126)) == 0u);
}

TEST_CASE("grid_step == fused_multiply_add where it takes the step: every model the CUDA cores run") {
  check_grid_form<float, 4>(fp::fp16(), fp::Mode::rne, -14, 11, 23);   // tc-v100
  check_grid_form<float, 4>(fp::tf32(), fp::Mode::rz, -126, 12, 24);   // tc-a100-tf32
  check_grid_form<float, 8>(fp::fp16(), fp::Mode::rne, -14, 13, 24);   // tc-a100
  check_grid_form<float, 8>(fp::bf16(), fp::Mode::rne, -126, 14, 24);  // tc-a100-bf16
  check_grid_form<float, 8>(fp::tf32(), fp::Mode::rne, -126, 15, 25);
  check_grid_form<float, 16>(fp::bf16(), fp::Mode::rne, -126, 16, 25);  // an int64 sum
  check_grid_form<float, 16>(fp::fp16(), fp::Mode::rne, -14, 17, 0);    // the coarsest grid
  const fp::Format held = fp::fp64();  // tc-turing-unconverted: fp32 factors in doubles
  check_grid_form<double, 4>(fp::fp32(), fp::Mode::rne, -149, 18, 23, &held);
  check_grid_form<double, 8>(fp::fp32(), fp::Mode::rne, -149, 19, 25, &held);
  check_grid_form<double, 2>(fp::fp32(), fp::Mode::rne, -149, 20, 5, &held);
}
