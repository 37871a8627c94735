// The reductions of training, each through the schedule and arithmetic the OpTable gives for its
// kind. float runs the fast engine; double (used by the fp64 finite-difference tests) runs the
// reference evaluator.
#pragma once

#include <cstddef>

#include "models/context.hpp"

namespace fplab::models {

// C (m x n) = A (m x k) B (k x n), the sum over k following op's schedule.
template <class T>
void matmul(const Context& ctx, OpKind op, const T* a, const T* b, T* c, size_t m, size_t n, size_t k,
            uint64_t part = 0);

// out[j] = sum over i < rows of x[i * cols + j] (a sum over the leading axis), per op's schedule.
template <class T>
void sum_rows(const Context& ctx, OpKind op, const T* x, size_t rows, size_t cols, T* out, uint64_t part = 0);

// out (cols x rows) = the transpose of x (rows x cols).
template <class T>
void transpose(const T* x, size_t rows, size_t cols, T* out);

}  // namespace fplab::models
