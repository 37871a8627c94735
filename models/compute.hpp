// The reductions of training, each through the schedule and arithmetic the OpTable gives for its
// kind. float runs the fast engine; double (used by the fp64 finite-difference tests) runs the
// reference evaluator.
#pragma once

#include <cstddef>

#include "models/context.hpp"
#include "sim/conv_geometry.hpp"

namespace fplab::models {

// C (m x n) = A (m x k) B (k x n), the sum over k following op's schedule.
template <class T>
void matmul(const Context& ctx, profiles::OpKind op, const T* a, const T* b, T* c, size_t m, size_t n, size_t k,
            uint64_t part = 0);

// out[j] = sum over i < rows of x[i * cols + j] (a sum over the leading axis), per op's schedule.
template <class T>
void sum_rows(const Context& ctx, profiles::OpKind op, const T* x, size_t rows, size_t cols, T* out, uint64_t part = 0);

// A convolution's forward GEMM with its im2col, or its input-gradient GEMM with its col2im, on
// ctx.backend when it takes them (ComputeBackend::conv_forward / conv_input_grad; fp32 only),
// under fwd's or dgrad's schedule. False when the caller must run the CPU path.
template <class T>
bool backend_conv_forward(const Context& ctx, const sim::ConvGeometry& geometry, size_t out_channels, const T* x,
                          const T* w, T* out_rows, T* cols);
template <class T>
bool backend_conv_input_grad(const Context& ctx, const sim::ConvGeometry& geometry, size_t out_channels,
                             const T* g_rows, const T* w_t, T* dx);

// out (cols x rows) = the transpose of x (rows x cols).
template <class T>
void transpose(const T* x, size_t rows, size_t cols, T* out);

}  // namespace fplab::models
