// cuDNN's BatchNorm kernels for larger planes, bn_fw_tr_1C11_kernel_NCHW and bn_bw_1C11_kernel_new
// (H200, cuDNN 9.19; docs/results/calibration_torch.md, "The 28x28 kernels"), one channel at a
// time: the order and arithmetic of their statistics and gradients, bit for bit where measured
// (batch 64 at 28x28, small_cnn_bn's first BatchNorm; batch 128 at 16x16 and 32x32, a ResNet-18's,
// and the backward at 14x14).
//
// 512 threads a channel. At 14x14, 16x16 and 28x28 warp w (of 16) takes the images w, w + 16, ...
// and lane l (of 32) the pixels l, l + 32, ...; at 32x32 four groups of 128 threads take every
// fourth image and thread l of a group the pixels l, l + 128, ...; images outer, pixels inner.
// Forward: each thread runs Welford's update with the GPU's approximate reciprocal (k += 1;
// d = x - m; m = fma(d, rcp(k), m); M2 = fma(d, x - m, M2)), turns its mean back into a partial
// sum fl(k m), and the 512 partials are added by xor shuffles of thread ids 16, 8, 4, 2, 1, then
// 256, 128, 64, 32: mean = fl(S rcp(n)); the variance's partials fma(k, fl(dm dm), M2), dm =
// m - mean, the same tree (fl(M2 + fl(fl(k dm) dm)) differs in channels whose threads' means lie
// apart: a trained layer's, docs/results/calibration_torch.md); inv_std = the GPU's rsqrt of fma(Q, rcp(n), eps); y =
// fma(inv_std, fl(gamma fl(x - mean)), beta). Backward: per thread the chains Sb += g and Sd = fma(g, fl(x - mean),
// Sd), from +0, in the same order, added by xor trees of the other order (1, 2, ..., 256): dbeta = Sb, dgamma = fl(Sd
// inv_std); dx = fl(fl(fl(fma(-d, k, g) - a) inv_std) gamma) with k = fl(fl(fl(Sd rcp(n)) inv_std) inv_std) and a =
// fl(dbeta rcp(n)). rcp is the GPU's rcp.approx.ftz.f32 (tools/gpu/gpu_reciprocal_table): measured whole on [1, 2).
#pragma once

#include <cstddef>
#include <string>

namespace fplab::sim {

// One channel's values in the kernels' (image, pixel) order: value (b, p) at
// values[b * image_stride + p * pixel_stride].
struct NchwPlane {
  const float* values;
  size_t batch, pixels, image_stride, pixel_stride;
  float at(size_t b, size_t p) const { return values[b * image_stride + p * pixel_stride]; }
};

// Why the model cannot take a channel of `batch` images of `pixels` values ("" where it can): an
// image size whose thread layout was measured, the batch a multiple of its image groups, each
// thread's count (at most 256) and n (2^k or 49 2^k) among the reciprocals written down.
// `backward`: bn_bw_1C11_kernel_new alone, which cuDNN also runs after its singleread forward
// (at 14x14 for batch 128, measured: there the forward model does not apply).
std::string cudnn_nchw_why_not(size_t batch, size_t pixels, bool backward = false);

// The kernels' pixel lanes for an image of `pixels` values (32 or 128; 0 where not measured) and
// the GPU's reciprocal of a thread's count k (1 .. 256): what a device twin of the model reads.
size_t cudnn_nchw_pixel_lanes(size_t pixels);
float cudnn_nchw_count_reciprocal(size_t k);

struct NchwStatistics {
  float mean = 0, inv_std = 0;
  float var = 0;  // fl(Q rcp(n)): for the running variance (fplab's update; cuDNN's is not measured)
};
NchwStatistics cudnn_nchw_statistics(const NchwPlane& x, float eps);

// The forward's output for one value.
float cudnn_nchw_output(float x, const NchwStatistics& s, float gamma, float beta);

struct NchwGradients {
  float dbeta = 0, dgamma = 0;
  float k = 0, a = 0;  // the input gradient's per-channel factors (above)
};
// g and x: the output gradient and the forward's input, the same layout.
NchwGradients cudnn_nchw_gradients(const NchwPlane& g, const NchwPlane& x, const NchwStatistics& s);

// The input gradient for one value.
float cudnn_nchw_input_gradient(float g, float x, const NchwStatistics& s, const NchwGradients& grads, float gamma);

}  // namespace fplab::sim
