// A C function in a shared library, as the black box fplab reveal probes:
//   float NAME(const float* x, size_t n)                      (a sum)
//   float NAME(const float* a, const float* b, size_t n)      (a dot product)
//   BLAS's cblas_sdot and cblas_sgemm                          (dot products: as_cblas_sdot,
//                                                               as_cblas_sgemm)
// The library stays loaded while the object lives. Loading runs the library's initialisers: only
// libraries one trusts belong here (fplab reveal says so in its help).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "reveal/probe_sum.hpp"
#include "reveal/replay_sum.hpp"

namespace fplab::reveal {

class SharedFunction {
 public:
  // Throws RevealError (one line, with dlerror's reason) if the library or symbol is missing.
  SharedFunction(const std::string& library, const std::string& symbol);
  SumFunction as_sum() const;
  DotFunction as_dot() const;
  // float cblas_sdot(int n, const float* x, int incx, const float* y, int incy), unit strides.
  DotFunction as_cblas_sdot() const;
  // cblas_sgemm (row-major, no transposes, alpha 1, beta 0) of a rows x n by n x cols GEMM whose
  // A row 0 is a and B column 0 is b, every other entry 0: the dot product output (0, 0) takes.
  // A GEMM rather than one dot, so that the library runs its GEMM kernels (a BLAS may send a
  // 1 x 1 product elsewhere).
  DotFunction as_cblas_sgemm(size_t rows, size_t cols) const;

 private:
  std::shared_ptr<void> handle_;
  void* symbol_ = nullptr;
};

}  // namespace fplab::reveal
