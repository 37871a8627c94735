// Where the reductions of training run. With no backend (Context::backend == nullptr) the CPU
// engine (sim::gemm, sim::reduce_batch) computes them; a backend takes over every fp32 GEMM and
// every sum over a leading axis with the same schedule and arithmetic, so for a deterministic
// schedule it must return the engine's bits. models/gpu_backend.hpp is the one that exists: our
// CUDA kernels. Elementwise work (bias adds, activations, softmax's exp/log/division, im2col,
// transposes, the optimiser) stays on the CPU: it has no reduction order to follow.
#pragma once

#include <cstddef>
#include <string>

#include "models/op_table.hpp"
#include "sim/noise.hpp"

namespace fplab::models {

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;
  virtual std::string name() const = 0;  // one line, e.g. "cuda: NVIDIA H100 80GB HBM3, sm_90, ..."
  // C (m x n) = A (m x k) B (k x n), row-major host arrays; the sum over k follows `choice`.
  virtual void matmul(const OpChoice& choice, const sim::NoiseKey& key, const float* a, const float* b, float* c,
                      size_t m, size_t n, size_t k) = 0;
  // out[j] = the sum over i < rows of x[i * cols + j], following `choice`.
  virtual void sum_rows(const OpChoice& choice, const sim::NoiseKey& key, const float* x, size_t rows, size_t cols,
                        float* out) = 0;
};

}  // namespace fplab::models
