// A GEMM factor as a tensor-core model takes it (Reducer::Input), on the device: its code in the
// instruction's input format and the value the model computes with. Shared by the kernel on the
// GPU's own tensor cores (gpu_tensor_core_gemm.cu) and the fused steps on CUDA cores
// (gpu_fused_gemm.cu), so that both convert as fp::round_double does.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "sim/schedule.hpp"

namespace fplab::sim::gpu {

using Factors = Reducer::Input;

// The exponent at which the factors' reference exponents are clamped (a fused step's alignment):
// the smallest normal exponent of their format, fp16's -14, tf32's and bf16's -126; factors taken
// as they are (none) are held in fp64 by the model (sim::fused_input_conversion), whose emin no
// fp32 reaches: -149, fp32's smallest exponent, clamps nothing.
template <Factors F>
constexpr int factor_emin = F == Factors::fp16 ? -14 : F == Factors::none ? -149 : -126;

// A factor as the instruction reads it: tf32 the fp32 pattern (the tensor core ignores the 13 low
// bits), rounded to tf32 first for tf32rne and tf32rna; bf16 and fp16 their codes, rounded to
// nearest even (fp::round_double's conversions, overflow to infinity included); none: the fp32
// pattern as it is.
template <Factors F>
__device__ uint32_t code_of(float x) {
  const uint32_t bits = __float_as_uint(x);
  if constexpr (F == Factors::tf32 || F == Factors::none) {
    return bits;
  } else if constexpr (F == Factors::tf32rne) {
    return isnan(x) ? bits : (bits + 0xfffu + ((bits >> 13) & 1u)) & 0xffffe000u;
  } else if constexpr (F == Factors::tf32rna) {
    return isnan(x) ? bits : (bits + 0x1000u) & 0xffffe000u;
  } else if constexpr (F == Factors::bf16) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
  } else {
    static_assert(F == Factors::fp16, "tf32, tf32rne, tf32rna, bf16, fp16 or none");
    return __half_as_ushort(__float2half_rn(x));
  }
}

// The value of a code, as the model converts the factor (tf32: truncated; a NaN stays a NaN).
template <Factors F>
__device__ float value_of(uint32_t code) {
  if constexpr (F == Factors::bf16) {
    return __uint_as_float(code << 16);
  } else if constexpr (F == Factors::fp16) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(code)));
  } else if constexpr (F == Factors::none) {
    return __uint_as_float(code);
  } else {
    const float x = __uint_as_float(code);
    return isnan(x) ? x : __uint_as_float(code & 0xffffe000u);
  }
}

// A factor's value in the model: its code's value.
template <Factors F>
__device__ float model_value(float x) {
  return value_of<F>(code_of<F>(x));
}

}  // namespace fplab::sim::gpu
