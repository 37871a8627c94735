// Exact fp32 GEMM: every C[i][j] is the exact sum of a[i][t] * b[t][j], rounded once.
#pragma once

#include <cstddef>
#include <functional>

#include "fp/exact_value.hpp"
#include "fp/format.hpp"
#include "fp/rounding.hpp"

namespace fplab::sim {

// The exact value of every output, handed to `sink(i, j, value)` (`mode` only decides the sign
// of exact zeros, as IEEE 754 does).
void exact_gemm_values(const float* a, const float* b, size_t m, size_t n, size_t k, fp::Mode mode,
                       const std::function<void(size_t, size_t, const fp::ExactValue&)>& sink);

// Rounded once to `format`; `stream_for(i, j)` gives the stochastic-rounding stream of output
// (i, j) (used in mode sr only).
void exact_gemm(const float* a, const float* b, float* c, size_t m, size_t n, size_t k, const fp::Format& format,
                const fp::RoundingOptions& options, const std::function<fp::CounterRng(size_t, size_t)>& stream_for);

}  // namespace fplab::sim
