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

// `format`: the factors' values; `model_input`: the format the model holds them in (fp64 for
// factors taken as they are, sim::fused_input_conversion's `none`), `format` when null.
template <int N>
void check_format(const fp::Format& format, fp::Mode input_mode, int emin, uint64_t seed, int fraction_bits = 25,
                  const fp::Format* model_input = nullptr) {
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
      const float got = sim::gpu::fused_step<N>(acc, x, y, count, emin, fraction_bits);
      if (std::bit_cast<uint32_t>(want) != std::bit_cast<uint32_t>(got)) {
        std::string terms;
        for (int i = 0; i < count; ++i) terms += " " + std::to_string(x[i]) + "*" + std::to_string(y[i]);
        INFO(format.name << " F=" << fraction_bits << " " << r.what << ": acc " << acc << ", products" << terms);
        CHECK(std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want));
        return;
      }
      ++checked;
    }
  }
  CHECK(checked == std::size(ranges) * 20000);
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
