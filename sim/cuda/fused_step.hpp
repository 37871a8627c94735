// The tensor-core model's fused step (sim/tensor_core.cpp, fused_multiply_add) on CUDA cores: for
// the steps the tensor-core GEMM redoes in software (gpu_tensor_core_gemm.cu) and for the models
// whose steps no mma instruction of the GPU computes (gpu_fused_gemm.cu): at most 16 products of
// factors already in their input format, F <= 25 fraction bits, the accumulator in the alignment,
// terms cut toward zero, one rounding of the fp32 result toward zero. Compiled for the device there
// and for the host in tests/test_fused_step.cpp, which holds it to fused_multiply_add bit for bit,
// so that the GPU's software path is checked where no GPU is.
#pragma once

#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define FPLAB_HOST_DEVICE __host__ __device__
#else
#define FPLAB_HOST_DEVICE
#endif

namespace fplab::sim::gpu::fused_step_detail {

FPLAB_HOST_DEVICE inline uint32_t bits_of(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  return std::bit_cast<uint32_t>(x);
#endif
}

FPLAB_HOST_DEVICE inline float float_of(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  return std::bit_cast<float>(bits);
#endif
}

FPLAB_HOST_DEVICE inline int leading_zeros(uint32_t x) {
#ifdef __CUDA_ARCH__
  return __clz(x);
#else
  return std::countl_zero(x);
#endif
}

// A finite nonzero float as significand * 2^scale, and floor(log2 |x|).
struct Parts {
  uint32_t significand;
  int scale, exponent;
};

FPLAB_HOST_DEVICE inline Parts parts_of(float x) {
  const uint32_t bits = bits_of(x), biased = (bits >> 23) & 0xffu, fraction = bits & 0x7fffffu;
  const uint32_t significand = biased ? fraction | 0x800000u : fraction;
  const int scale = (biased ? static_cast<int>(biased) : 1) - 150;
  return {significand, scale, scale + 31 - leading_zeros(significand)};
}

// The term's count of 2^grid units, cut toward zero (< 2^(F + 2) <= 2^27: the grid is F <= 25 bits
// below the largest term's reference exponent, and a term is below 2^(its exponent + 2)).
FPLAB_HOST_DEVICE inline int64_t units(uint64_t magnitude, int scale, int grid) {
  if (scale >= grid) return static_cast<int64_t>(magnitude << (scale - grid));
  const int shift = grid - scale;
  return shift >= 64 ? 0 : static_cast<int64_t>(magnitude >> shift);
}

// An exact double rounded to fp32 toward zero (to nearest, then one step back where that went
// outward; past FLT_MAX: FLT_MAX).
FPLAB_HOST_DEVICE inline float toward_zero(double v) {
  const float f = static_cast<float>(v);
  return std::fabs(static_cast<double>(f)) > std::fabs(v) ? std::nextafter(f, 0.0f) : f;
}

// A nonzero finite term's reference exponent: its own, clamped at its format's emin.
FPLAB_HOST_DEVICE inline int reference_exponent(float x, int emin) {
  const int e = parts_of(x).exponent;
  return e > emin ? e : emin;
}

}  // namespace fplab::sim::gpu::fused_step_detail

namespace fplab::sim::gpu {

// fused_multiply_add(acc, x[0..count), y[0..count), spec) with spec's products >= count, F =
// fraction_bits (0..25: then the N + 1 <= 17 cut terms sum exactly in 64 bits, and below 2^53, in
// a double), fp32 output toward zero, truncation toward zero, the accumulator in the alignment,
// for factors already in the input format whose emin is `emin` (tf32, bf16: -126; fp16: -14;
// fp32 values taken as they are, which the model holds in fp64: -149, which clamps none).
template <int N>
FPLAB_HOST_DEVICE float fused_step(float acc, const float (&x)[N], const float (&y)[N], int count, int emin,
                                   int fraction_bits = 25) {
  static_assert(N >= 1 && N <= 16, "at most 16 products: their cut sum stays below 2^32");
  using namespace fused_step_detail;
  bool nan = std::isnan(acc), pos_inf = acc == INFINITY, neg_inf = acc == -INFINITY;
  bool pos_zero = acc == 0 && !std::signbit(acc), neg_zero = acc == 0 && std::signbit(acc);
  int largest = INT_MIN;
  for (int i = 0; i < count; ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) {
      nan = true;
      continue;
    }
    const bool negative = std::signbit(x[i]) != std::signbit(y[i]);
    if (std::isinf(x[i]) || std::isinf(y[i])) {
      if (x[i] == 0 || y[i] == 0)
        nan = true;
      else
        (negative ? neg_inf : pos_inf) = true;
      continue;
    }
    if (x[i] == 0 || y[i] == 0) {
      (negative ? neg_zero : pos_zero) = true;
      continue;
    }
    const int e = reference_exponent(x[i], emin) + reference_exponent(y[i], emin);
    largest = e > largest ? e : largest;
  }
  if (nan || (pos_inf && neg_inf)) return float_of(0x7fc00000u);  // fp::round_exact's NaN in fp32
  if (pos_inf || neg_inf) return neg_inf ? -INFINITY : INFINITY;
  if (acc != 0) {
    const int e = reference_exponent(acc, -126);  // the output's (fp32's) emin
    largest = e > largest ? e : largest;
  }
  if (largest == INT_MIN) return neg_zero && !pos_zero ? -0.0f : 0.0f;  // only zeros: IEEE's sign rule
  const int grid = largest - fraction_bits;
  int64_t total = 0;
  for (int i = 0; i < count; ++i) {
    if (x[i] == 0 || y[i] == 0) continue;
    const Parts px = parts_of(x[i]), py = parts_of(y[i]);
    const int64_t u = units(static_cast<uint64_t>(px.significand) * py.significand, px.scale + py.scale, grid);
    total += std::signbit(x[i]) != std::signbit(y[i]) ? -u : u;
  }
  if (acc != 0) {
    const Parts pa = parts_of(acc);
    const int64_t u = units(pa.significand, pa.scale, grid);
    total += std::signbit(acc) ? -u : u;
  }
  if (total == 0) return 0.0f;  // nonzero terms that cancel: +0 when rounding toward zero
  // |total| < 2^32 and 2^grid a normal double (grid in [-323, 254]): the product is exact.
  return toward_zero(std::scalbn(static_cast<double>(total), grid));
}

}  // namespace fplab::sim::gpu
