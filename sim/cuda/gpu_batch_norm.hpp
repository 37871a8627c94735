// Batch normalisation's elementwise steps on the device, bit for bit the float32 operations that
// fplab.torch's BatchNorm (python/fplab/torch/_ops_norm.py) runs through PyTorch on the CPU, fused
// into a few kernels: with PyTorch's own operations an emulated BatchNorm took some fifty calls
// from Python a step, and those calls, not the GPU, set a step's pace (docs/results/torch_emulate.md).
//
// The sums themselves (op kinds bn_stats and bias_grad) are the segmented or seeded reductions'
// (gpu_reduce.hpp, gpu_seeded.hpp); the functions here make their segments and use their results.
// x is (batch, channels, positions) in memory, row-major; a channel's terms are ordered (b, p), term
// b·P + p. Everything is enqueued on the default stream, not waited for. No CUDA types here.
#pragma once

#include <cstddef>

namespace fplab::sim::gpu {

struct PlanesShape {
  size_t batch = 0, channels = 0, positions = 0;
  size_t per_channel() const { return batch * positions; }  // a channel's terms: n
  size_t size() const { return batch * channels * positions; }
};

// What a channel's segment of terms holds (segments[c·n + b·P + p], n = per_channel()).
enum class SegmentTerms {
  values,           // x[b, c, p]
  centred_squares,  // d·d with d = x[b, c, p] − sums[c] / n, each rounded (the variance's terms)
  products,         // x[b, c, p] · y[b, c, p] (the scale gradient's terms: g · x̂)
  values_and_products,  // both: x's in segment c, x·y's in segment channels + c (2·channels segments)
};

// segments (channels x n, device; channel c's terms from segments[c·ld], ld ≥ n; 2·channels of them
// for values_and_products) from x (and `other`: sums for centred_squares, y for the products).
void batch_norm_segments(SegmentTerms terms, const float* x, const float* other, const PlanesShape& shape,
                         float* segments, size_t ld);

// The stride batch_norm_segments' callers use: n rounded up to a multiple of 4, which the segmented
// reduction reads in place (GpuSegmentedReduction::run_in_place).
inline size_t segment_stride(const PlanesShape& shape) { return (shape.per_channel() + 3) / 4 * 4; }

// The per-channel constants of the output and what training moves, one thread a channel:
// training: mean = sums[c] / n, var = squares[c] / n (n as a float32, each quotient rounded), and
// where running statistics are given, running ← float((1 − momentum)·running + momentum·batch) in
// double precision, the variance unbiased as float32 var·n / (n − 1) (var when n = 1); evaluation:
// mean and var are the running statistics. Then inv_std = 1 / sqrt(var + float(eps)), each step
// rounded to float32. `mean` and `inv_std` (channels, device) receive the results.
struct BatchNormStatistics {
  bool training = true;
  double momentum = 0.1, eps = 1e-5;
  const float* sums = nullptr;     // training: Σ x per channel
  const float* squares = nullptr;  // training: Σ (x − mean)² per channel
  float* running_mean = nullptr;   // may be null (no running statistics)
  float* running_var = nullptr;
};
void batch_norm_statistics(const BatchNormStatistics& statistics, const PlanesShape& shape, float* mean,
                           float* inv_std);

// x̂ = (x − mean[c]) · inv_std[c] into xhat, and y = weight[c] · x̂ + bias[c] into y (a product
// and a sum, each rounded; without weight y = x̂, without bias no sum).
void batch_norm_output(const float* x, const float* mean, const float* inv_std, const float* weight, const float* bias,
                       const PlanesShape& shape, float* xhat, float* y);

// The input's gradient from the output's, gy: training dx = (γ·inv_std / n) · ((n·gy − dbeta[c])
// − x̂·dgamma[c]), evaluation dx = gy · (γ·inv_std), γ = weight[c] (1 without weight), n a float32,
// each operation rounded in that order (the CPU's expression).
void batch_norm_input_gradient(bool training, const float* gy, const float* xhat, const float* inv_std,
                               const float* weight, const float* dbeta, const float* dgamma, const PlanesShape& shape,
                               float* dx);

// out = fma(x, scale[c], addend) elementwise, one rounding (cuDNN's BatchNorm form: y and dx),
// addend per channel (addend[c]) or per element (addend[e], x's layout).
void channel_fma(const float* x, const float* scale, const float* addend, bool addend_per_element,
                 const PlanesShape& shape, float* out);

}  // namespace fplab::sim::gpu
