// The `exact` profile on the GPU: every output of a GEMM, or every sum of a batch, as the exact sum
// of its terms rounded once to fp32 to nearest even, so that the result is sim::gemm's or
// sim::reduce_batch's for `all:exact` bit for bit: a thread an output, its terms in a certified
// double sum (certified_sum.hpp, a product and eight double additions a term), and only where
// that cannot certify the rounding once more in a fixed-point accumulator (long_accumulator.hpp,
// some thirty integer operations and three read-modify-writes of local memory a term). No CUDA
// types in this header.
#pragma once

#include <cstddef>
#include <vector>

#include "sim/cuda/device_buffer.hpp"
#include "sim/cuda/gpu_seeded.hpp"
#include "sim/engine.hpp"

namespace fplab::sim::gpu {

class GpuExact {
 public:
  GpuExact() = default;
  GpuExact(const GpuExact&) = delete;
  GpuExact& operator=(const GpuExact&) = delete;

  // C = A B (row-major device matrices), each output the exact sum of its k products rounded to
  // fp32. Enqueued on the default stream.
  void gemm(const float* a, const float* b, float* c, GemmShape shape);
  // results[o] = the exact sum of output o's layout.n terms rounded to fp32. Enqueued on the
  // default stream.
  void sums(const float* x, const BatchLayout& layout, float* results);

  // Device memory held: the accumulators of sums taken in parts of K (few outputs, long K).
  size_t workspace_bytes() const { return parts_.bytes(); }

 private:
  DeviceBuffer parts_;
};

// Upload, run, wait: the outputs (tests).
std::vector<float> exact_gemm_on_gpu(const float* a, const float* b, GemmShape shape);

}  // namespace fplab::sim::gpu
