// Reductions and GEMMs of rounded products in any order addition_program.hpp compiles, on the
// device: one thread an output runs the schedule's program over its terms (fp32 additions rounded
// to nearest even, __fadd_rn; products rounded first, __fmul_rn), so that the result is
// sim::reduce_batch's or sim::gemm's (products = rounded) bit for bit. Programs are compiled once
// per schedule and length and kept on the device. No CUDA types in this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sim/cuda/addition_program.hpp"
#include "sim/cuda/device_buffer.hpp"
#include "sim/cuda/gpu_seeded.hpp"
#include "sim/engine.hpp"

namespace fplab::sim::gpu {

class GpuAdditionProgram {
 public:
  GpuAdditionProgram() = default;
  GpuAdditionProgram(const GpuAdditionProgram&) = delete;
  GpuAdditionProgram& operator=(const GpuAdditionProgram&) = delete;

  // results[o] = output o's sum of its layout.n terms (BatchLayout) in the schedule's order. x and
  // results device pointers; enqueued on the default stream. Throws NotRealisable.
  void run(const Schedule& schedule, const float* x, const BatchLayout& layout, float* results);
  // C = A B (row-major device matrices, m x k, k x n, m x n), every product rounded to fp32 and the
  // k of an output added in the schedule's order. Throws NotRealisable.
  void run_gemm_rounded(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape);

  size_t workspace_bytes() const { return bytes_ + partials_.bytes() + chains_.workspace_bytes(); }

 private:
  struct Uploaded {
    std::unique_ptr<DeviceBuffer> buffer;
    const int32_t* ops = nullptr;
    size_t length = 0;
    int depth = 0;
  };
  const Uploaded& program(const Schedule& schedule, size_t n);

  std::map<std::pair<std::string, size_t>, Uploaded> programs_;
  size_t bytes_ = 0;
  GpuSeededReduction chains_;  // a first stage of in-order chains, in parallel (its `chains`)
  DeviceBuffer partials_;
};

// Upload host values, run, wait: the outputs (tests, tools). Throw NotRealisable.
std::vector<float> reduce_batch_program(const Schedule& schedule, std::span<const float> x, const BatchLayout& layout);
std::vector<float> gemm_rounded_program(const Schedule& schedule, const float* a, const float* b, GemmShape shape);

}  // namespace fplab::sim::gpu
