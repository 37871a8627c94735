// CUDA's float32 rsqrtf as an NVIDIA GPU computes it, bit for bit, on the CPU.
//
// The GPU's reciprocal square root is an approximation, not correctly rounded: on an H200 (PyTorch
// 2.11's torch.rsqrt, CUDA 13) it is 1 ulp below the correctly rounded result for 14% of inputs,
// 1 ulp above for 7.7%, 2 below for 8 of 2^24. cuDNN's BatchNorm kernels take their inverse
// standard deviation from it (docs/results/calibration_torch.md), so an emulation of their bits
// needs the device's function. It was measured whole: every x > 0 is m 4^k with m in [1, 4), the
// device's rsqrt(x) is its rsqrt(m) 2^-k (checked on millions of floats of every binade), and the
// 2^24 differences on [1, 4) from the correctly rounded result are the table
// fp/data/cuda_rsqrt_delta.bin.gz (experiments/gpu_rsqrt_table.py measure and pack), carried
// inside the library. tests/test_cuda_rsqrt.cpp holds this function to the device's results on
// 8192 other floats (subnormals and special values among them).
#pragma once

#include <cstdint>
#include <span>

namespace fplab::fp {

// rsqrtf(x) as the GPU gives it: +inf at +0, -inf at -0, +0 at +inf, NaN below zero and at NaN.
// The first call unpacks the table (4 MiB, kept for the process).
float cuda_rsqrt(float x);

// The float32 nearest 1/sqrt(x) (ties to even), x > 0 finite: the table's reference.
float rsqrt_correctly_rounded(float x);

// The table's entry for m in [1, 4): device minus correctly rounded, in ulps (-2 to +1).
int cuda_rsqrt_delta(uint32_t index);

// The whole table as it is kept (2^22 bytes): entry i (m of bits 0x3F800000 + i) in bits
// 2 (i mod 4) .. 2 (i mod 4) + 1 of byte i / 4, holding the difference + 2 (GPU code reads it so).
std::span<const uint8_t> cuda_rsqrt_packed_table();

}  // namespace fplab::fp
