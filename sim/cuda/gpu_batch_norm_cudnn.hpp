// cuDNN's BatchNorm arithmetic (its singleread kernels: docs/results/calibration_torch.md, "cuDNN's
// BatchNorm, bit for bit") on the device, the elementwise and per-channel steps of the `cudnn` form
// that models/batch_norm.cpp and fplab.torch's _ops_norm.py compute on the CPU, fused so that an
// emulated layer is a handful of kernels rather than some forty PyTorch calls and a round trip to
// the host for the GPU's rsqrt. The sums and fused dots are the segmented reduction's
// (gpu_reduce.hpp); these functions use their results. Shapes as gpu_batch_norm.hpp's (x is
// (batch, channels, positions)); every call is enqueued on the default stream.
#pragma once

#include <cstddef>

#include "sim/cuda/gpu_batch_norm.hpp"

namespace fplab::sim::gpu {

// mean[c] = sums[c] · fl(1/n), and centred = x − mean[c] elementwise.
void cudnn_mean_and_centred(const float* x, const float* sums, const PlanesShape& shape, float* mean, float* centred);

// Per channel from the fused dot of the centred values (squares): var = squares · fl(1/n);
// running statistics as batch_norm_statistics moves them (double precision, the variance unbiased
// as float32 var·n / (n − 1)), where given; inv_std = the GPU's rsqrt (fp::cuda_rsqrt's table) of
// var + float(eps); scale = γ·inv_std and shift = β − mean·scale, each rounded (γ and β given).
struct CudnnStatistics {
  const float* mean = nullptr;
  const float* squares = nullptr;
  const float* weight = nullptr;
  const float* bias = nullptr;
  float* running_mean = nullptr;  // may be null
  float* running_var = nullptr;
  double momentum = 0.1, eps = 1e-5;
};
void cudnn_statistics(const CudnnStatistics& statistics, const PlanesShape& shape, float* inv_std, float* scale,
                      float* shift);

// The backward's per-channel factors from dbeta (Σ g) and the fused dot Σ g·d: dgamma = dot ·
// inv_std; with s = γ·inv_std: a = −(s·((dgamma·inv_std)·fl(1/n))), b = −(s·(dbeta·fl(1/n))).
void cudnn_gradient_factors(const float* dbeta, const float* dots, const float* inv_std, const float* weight,
                            const PlanesShape& shape, float* dgamma, float* scale, float* a, float* b);

// dx = fma(centred, a[c], fma(gy, scale[c], b[c])) elementwise.
void cudnn_input_gradient(const float* gy, const float* centred, const float* scale, const float* a, const float* b,
                          const PlanesShape& shape, float* dx);

// Running statistics a forward moves where given (cudnn_statistics' way).
struct RunningStatistics {
  float* mean = nullptr;  // may be null
  float* var = nullptr;   // may be null
  double momentum = 0.1;
};

// cuDNN's kernels for larger planes (sim/cudnn_nchw_batch_norm.hpp, the same bits), a block of 512
// threads a channel as theirs: training statistics into mean, inv_std and var (channels each;
// var = fl(Q rcp(n)), from which the running statistics move), then y = fma(inv_std, fl(gamma
// fl(x - mean)), beta). The shape must be one cudnn_nchw_why_not accepts (the caller checks).
void cudnn_nchw_forward(const float* x, const float* weight, const float* bias, const PlanesShape& shape, float eps,
                        float* mean, float* inv_std, float* var, float* y, const RunningStatistics& running = {});
// Its backward: dgamma, dbeta (channels each) and dx where not null, from the forward's mean and
// inv_std; `factors` 2 x channels device floats of scratch (the input gradient's k and a).
void cudnn_nchw_backward(const float* gy, const float* x, const float* mean, const float* inv_std, const float* weight,
                         const PlanesShape& shape, float* dgamma, float* dbeta, float* factors, float* dx);

// out[i] = the GPU's rsqrt of x[i] as cudnn_statistics computes it on the device (fp::cuda_rsqrt's
// table), for the tests: x and out n values of host memory, copied through the device.
void cuda_rsqrt_on_device(const float* x, size_t n, float* out);

}  // namespace fplab::sim::gpu
