// The shape of a 2-D convolution lowered to GEMMs (im2col): input (batch, channels, height,
// width), a square kernel, one stride and one zero padding for both axes. Plain C++: shared by
// models/conv2d's CPU path, the ComputeBackend interface and the CUDA kernels (sim/cuda/gpu_conv).
#pragma once

#include <cstddef>

namespace fplab::sim {

struct ConvGeometry {
  size_t batch = 0, channels = 0, height = 0, width = 0;
  size_t kernel = 1, stride = 1, padding = 0;

  size_t out_h() const { return (height + 2 * padding - kernel) / stride + 1; }
  size_t out_w() const { return (width + 2 * padding - kernel) / stride + 1; }
  // The im2col matrix: one row an output position (b, oy, ox), one column a tap (c, i, j).
  size_t rows() const { return batch * out_h() * out_w(); }
  size_t taps() const { return channels * kernel * kernel; }
  size_t input_size() const { return batch * channels * height * width; }
};

}  // namespace fplab::sim
