// Per-layer exceptions to a profile's table: real libraries pick a kernel per layer shape (cuDNN's
// heuristics send one convolution's weight gradient to an atomic kernel and the next one's to a
// deterministic one), so a profile measured on real hardware needs entries that apply to some
// layers only (docs/profiles.md, "Layer rules").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/arithmetic.hpp"
#include "sim/schedule.hpp"

namespace fplab::profiles {

struct OpChoice {
  sim::Schedule schedule;
  sim::Arithmetic arithmetic;
};

// The layer whose reductions run now: a fully connected layer (in, out features; batch = the rows
// it multiplies: cuBLAS picks its kernels by the GEMM's shape, and a weight gradient's sum runs
// over them), a 2-D convolution (in, out channels, a square kernel, stride, the input's height;
// batch = its images: PyTorch picks a bias gradient's reduction by the number of terms, images x
// pixels) or a batch normalisation (in = its channels, height = its input's, 1 for one value a
// channel per example; batch = the examples it normalises over: cuDNN picks its kernels by the
// values a channel).
struct LayerShape {
  enum class Kind : uint8_t { linear, conv, batch_norm };
  Kind kind = Kind::linear;
  size_t in = 0, out = 0;
  size_t kernel = 0, stride = 0, height = 0;  // convolutions (and a batch norm's height)
  size_t batch = 0;                           // rows, images or examples (above)
  std::string describe() const;               // "conv(16->32, 3x3, stride 1) at 14 pixels"
};
std::string_view layer_kind_name(LayerShape::Kind kind);  // "linear", "conv", "bn"

// Which layers a rule applies to: every field given must equal the layer's.
struct LayerMatch {
  LayerShape::Kind kind = LayerShape::Kind::conv;
  std::optional<size_t> in, out, kernel, stride, height, batch;
  bool matches(const LayerShape& layer) const;
  std::string describe() const;  // "conv kernel=3 height=14"
};

// How a convolution's weight gradient is computed. `gemm`: the columns' transpose times the output
// gradient, each weight's sum over (image, position) in the wgrad schedule. `winograd`: cuDNN's F(4x4, 3x3)
// transforms and roundings (sim/winograd_wgrad.hpp), the 36 transformed-domain sums over (image, tile) in the wgrad
// schedule: cuDNN's winograd_nonfused kernels, 3x3 stride-1 layers only.
enum class ConvWgrad : uint8_t { gemm, winograd };
std::string_view conv_wgrad_name(ConvWgrad form);

// The arithmetic of a batch normalisation in training around its sums (models/batch_norm.hpp).
// `fplab`: mean = sum / n, var = sum((x - mean)^2) / n, 1 / sqrt(var + eps) correctly rounded,
// y = gamma ((x - mean) invstd) + beta. `cudnn`: cuDNN's bn_fw_tr_1C11_singleread and
// bn_bw_1C11_singleread kernels, as revealed on an H200: the reciprocal of n first, the variance's
// squares fused into its sum, the GPU's approximate rsqrt, y = fma(x, scale, shift), and their own
// backward formula (docs/results/calibration_torch.md, "cuDNN's BatchNorm, bit for bit").
// `cudnn-nchw`: the kernels cuDNN runs on larger planes, bn_fw_tr_1C11_kernel_NCHW and
// bn_bw_1C11_kernel_new (per-thread Welford chains with the GPU's approximate reciprocal, xor trees;
// sim/cudnn_nchw_batch_norm.hpp), measured at 64 images of 28x28 and 128 of 16x16 and 32x32.
// `cudnn-nchw-backward`: the singleread forward (as `cudnn`) with bn_bw_1C11_kernel_new's backward,
// the pair cuDNN runs at 128 images of 14x14.
enum class BatchNormForm : uint8_t { fplab, cudnn, cudnn_nchw, cudnn_nchw_backward };
std::string_view batch_norm_form_name(BatchNormForm form);

struct LayerRule {
  LayerMatch match;
  std::array<std::optional<OpChoice>, 7> ops;  // by OpKind; unset: the table's own entry
  std::optional<ConvWgrad> conv_wgrad;         // unset: gemm (or a later rule's)
  std::optional<BatchNormForm> batch_norm;     // unset: fplab (or a later rule's)
};

}  // namespace fplab::profiles
