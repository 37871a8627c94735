// A sim::Arithmetic from its format, rounding mode and products (the other fields at their
// defaults), for the tests that list arithmetics to run the engine and the reference under
// (test_engine_vs_reference, test_gemm_empty_k): one definition instead of a copy in each.
#pragma once

#include "fp/format.hpp"
#include "fp/rounding.hpp"
#include "sim/arithmetic.hpp"

namespace fplab::test {

inline sim::Arithmetic arithmetic_of(fp::Format format, fp::Mode mode, sim::Products products = sim::Products::fused) {
  sim::Arithmetic ar;
  ar.format = format;
  ar.mode = mode;
  ar.products = products;
  return ar;
}

}  // namespace fplab::test
