// Where the reductions of training run. With no backend (Context::backend == nullptr) the CPU
// engine (sim::gemm, sim::reduce_batch) computes them; a backend takes over every fp32 GEMM and
// every sum over a leading axis with the same schedule and arithmetic, so for a deterministic
// schedule it must return the engine's bits. It may also take over a convolution's lowering
// (im2col before the forward GEMM, col2im after the input gradient's), bit for bit the CPU's.
// models/gpu_backend.hpp is the one that exists: our CUDA kernels. Elementwise work (bias adds,
// activations, softmax's exp/log/division, transposes, the optimiser) stays on the CPU: it has
// no reduction order to follow.
#pragma once

#include <cstddef>
#include <string>

#include "profiles/op_table.hpp"
#include "sim/conv_geometry.hpp"
#include "sim/noise.hpp"

namespace fplab::models {

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;
  virtual std::string name() const = 0;  // one line, e.g. "cuda: NVIDIA H100 80GB HBM3, sm_90, ..."
  // C (m x n) = A (m x k) B (k x n), row-major host arrays; the sum over k follows `choice`.
  virtual void matmul(const profiles::OpChoice& choice, const sim::NoiseKey& key, const float* a, const float* b, float* c,
                      size_t m, size_t n, size_t k) = 0;
  // out[j] = the sum over i < rows of x[i * cols + j], following `choice`.
  virtual void sum_rows(const profiles::OpChoice& choice, const sim::NoiseKey& key, const float* x, size_t rows, size_t cols,
                        float* out) = 0;

  // A convolution (models/conv2d.hpp) with its lowering. Each returns false when the backend does
  // not take convolutions (the default), and the caller runs the CPU path; true when it computed
  // the result. w: taps() x out_channels; rows: the geometry's rows() (output positions).
  //
  // Forward: out_rows (rows x out_channels) = im2col(x) w, the sum over taps following `choice`
  // (fwd); x: (batch, channels, height, width). When `cols` is not null it receives im2col(x)
  // (rows x taps), which the weight gradient needs: that GEMM (Conv2d::backward, OpKind::wgrad)
  // then runs through matmul like every other, from the host. Copying the columns down costs
  // what uploading them once more would, keeps the bits the CPU's (im2col only copies) and keeps
  // no device state between a layer's forward and backward.
  virtual bool conv_forward(const profiles::OpChoice& /*choice*/, const sim::NoiseKey& /*key*/, const sim::ConvGeometry&,
                            size_t /*out_channels*/, const float* /*x*/, const float* /*w*/, float* /*out_rows*/,
                            float* /*cols*/) {
    return false;
  }
  // Input gradient: dx (batch, channels, height, width) = col2im(g_rows w_t), the GEMM's sum over
  // out_channels following `choice` (dgrad); g_rows: rows x out_channels, w_t: out_channels x
  // taps. col2im adds each element's terms in Conv2d::backward's order, from +0.
  virtual bool conv_input_grad(const profiles::OpChoice& /*choice*/, const sim::NoiseKey& /*key*/, const sim::ConvGeometry&,
                               size_t /*out_channels*/, const float* /*g_rows*/, const float* /*w_t*/, float* /*dx*/) {
    return false;
  }
};

}  // namespace fplab::models
