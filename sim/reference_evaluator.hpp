// The slow, obviously-correct evaluator of a schedule: partials are kept as values or exact
// products, every addition goes through the exact superaccumulator and is rounded once. The fast
// engine is tested against it bit for bit.
#pragma once

#include <span>

#include "sim/arithmetic.hpp"
#include "sim/noise.hpp"
#include "sim/schedule.hpp"

namespace fplab::sim {

// Sum of `values` in the order the schedule gives, in the given arithmetic. Values are used as
// they are (callers round inputs to the format first if they model data stored in it).
double reduce_reference(const Schedule& schedule, std::span<const double> values, const Arithmetic& arithmetic,
                        const NoiseKey& key = {});

// Dot product: the terms are the products a[i] * b[i], entering per arithmetic.products.
double dot_reference(const Schedule& schedule, std::span<const double> a, std::span<const double> b,
                     const Arithmetic& arithmetic, const NoiseKey& key = {});

// C = A B (A m x k, B k x n, C m x n, row-major doubles), each output a dot_reference with the
// same noise keys as sim::gemm (gemm_output_key). Slow; for tests and small fp64 problems.
struct GemmShape;
void gemm_reference(const Schedule& schedule, const double* a, const double* b, double* c, const GemmShape& shape,
                    const Arithmetic& arithmetic, const NoiseKey& key = {});

}  // namespace fplab::sim
