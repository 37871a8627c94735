// fp32 reductions on the GPU that follow a schedule (gpu_plan.hpp says which ones): for a
// deterministic schedule the result equals sim::reduce(schedule, values, fp32/rne) bit for bit;
// an `all:atomic` grid combine adds the block partials in the order the hardware delivers them.
// No CUDA types in this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sim/cuda/gpu_plan.hpp"

namespace fplab::sim::gpu {

// One run with its grid combine recorded.
struct RecordedRun {
  float result = 0;
  std::vector<float> partials;        // the first pass's block partials, in block order
  std::vector<int32_t> ticket_order;  // blocks in the order they took a ticket once their partial was ready
  // atomic only: blocks in the order atomicAdd applied them, recovered from the values atomicAdd
  // returned (each block's "old" value is the sum of those before it); empty when no chain of
  // exact fp32 round-to-nearest additions explains those values. Blocks whose partial leaves the
  // running sum unchanged (empty ones: -0) cannot be placed among themselves from the values;
  // they are put in ticket order.
  std::vector<int32_t> fold_order;
};

class GpuReduction {
 public:
  explicit GpuReduction(std::span<const float> values);  // copies the values to the device
  GpuReduction(const float* device_values, size_t n);    // runs on the caller's device memory
  ~GpuReduction();
  GpuReduction(const GpuReduction&) = delete;
  GpuReduction& operator=(const GpuReduction&) = delete;

  size_t size() const { return n_; }
  float run(const ReductionPlan& plan);  // launches and waits
  RecordedRun run_recorded(const ReductionPlan& plan);
  // Enqueues the kernels on the default stream and returns (for timing); result() waits.
  void launch(const ReductionPlan& plan);
  float result() const;
  // Blocks of the plan's first pass that the device holds at once (one "wave").
  static int64_t resident_blocks(const ReductionPlan& plan);

 private:
  void launch(const ReductionPlan& plan, bool record);
  void reserve(int64_t blocks);

  const float* x_ = nullptr;
  float* owned_ = nullptr;
  size_t n_ = 0;
  int64_t capacity_ = 0;  // block partials the workspace holds
  float* partials_ = nullptr;
  float* old_values_ = nullptr;
  int32_t* ticket_order_ = nullptr;
  unsigned* ticket_ = nullptr;
  float* result_ = nullptr;
};

// Many reductions of one plan at once (one launch, blockIdx.y the segment): what training needs
// for its sums over a batch (bias gradients, softmax denominators, BatchNorm statistics). Each
// segment's result equals plan's single reduction of that segment bit for bit (deterministic
// plans); an atomic combine draws its own arrival order per segment. Device buffers are kept
// and grown between calls.
class GpuSegmentedReduction {
 public:
  GpuSegmentedReduction() = default;
  ~GpuSegmentedReduction();
  GpuSegmentedReduction(const GpuSegmentedReduction&) = delete;
  GpuSegmentedReduction& operator=(const GpuSegmentedReduction&) = delete;

  // results[s] = the reduction of values[s * n .. s * n + n), s < count. values and results may
  // each be a host or a device pointer (cudaMemcpyDefault tells which: unified addressing), so
  // that tensors already on the device (fplab.torch) make no round trip through the host.
  void run(const ReductionPlan& plan, const float* values, size_t n, size_t count, float* results);
  // results[j] = the reduction of column j of x (rows x cols, row-major; host or device, as
  // results): the terms x[0 * cols + j], x[1 * cols + j], ... in row order (models' sum over the
  // batch axis).
  void run_columns(const ReductionPlan& plan, const float* x, size_t rows, size_t cols, float* results);
  // The same as run on segments already laid out for the kernel, in device memory: segment s at
  // segments[s * ld ...], ld a multiple of 4 and segments 16-byte aligned (its float4 loads);
  // results in device memory too. No copy in or out: for callers that make the segments anyway
  // (BatchNorm's, sim/cuda/gpu_batch_norm). Throws std::invalid_argument on a misaligned layout.
  void run_in_place(const ReductionPlan& plan, const float* segments, size_t n, size_t ld, size_t count,
                    float* results);
  // The same sums read from a (batch, channels, positions) tensor x in device memory, segment c
  // the terms x[b, c, p] in the order b·positions + p (BatchNorm's per-channel sums without laying
  // the segments out: run_in_place's bits); where centre_sums (device floats, one a channel) is
  // given, each term squared about the channel's mean first, d = x − centre_sums[c] / n, d·d
  // (each rounded: batch_norm_segments' centred squares). Results in device memory. False, nothing
  // run, where the plan's first pass does not read strided vectors (contiguous or interleaved
  // folds), is one warp's sum of many terms (the staged pass's, which reads segments) or x and
  // positions do not suit its loads: the caller lays out segments then.
  bool run_planes_in_place(const ReductionPlan& plan, const float* x, size_t batch, size_t channels, size_t positions,
                           const float* centre_sums, float* results);
  // Fused dots on segments laid out as run_in_place's: results[s] = the schedule's sum of the
  // products a[s·ld + i]·b[s·ld + i], each fused into its thread's chain (fmaf, one rounding), the
  // partials then added as the plan says: sim::gemm's 1 x n by n x 1 products with products =
  // "fused" (sim::channel_dots), bit for bit, for plans dot_why_not accepts (else NotRealisable).
  // a, b (count x n, row-major) and results host or device memory, as run's.
  void run_dots(const ReductionPlan& plan, const float* a, const float* b, size_t n, size_t count, float* results);
  // The same on segments already laid out (a and b at s·ld, device memory; results in device memory).
  void run_dots_in_place(const ReductionPlan& plan, const float* a, const float* b, size_t n, size_t ld,
                         size_t count, float* results);
  // Bytes of device memory this object holds (its copies of the terms, partials, results, tickets).
  size_t workspace_bytes() const;

 private:
  // device_results: results is device memory, written by the kernels directly.
  void reduce_segments(const ReductionPlan& plan, const float* device_segments, size_t n, size_t ld, size_t count,
                       float* results, bool device_results = false, const float* device_second = nullptr);

  float *input_ = nullptr, *segments_ = nullptr, *partials_ = nullptr, *results_ = nullptr, *second_ = nullptr;
  unsigned* ticket_ = nullptr;
  size_t input_capacity_ = 0, segments_capacity_ = 0, partials_capacity_ = 0, results_capacity_ = 0,
         ticket_capacity_ = 0, second_capacity_ = 0;
};

// Why run_dots_in_place cannot take a plan ("" where it can): the products are fused into the
// first pass's chains, which must be strided with one accumulator a thread, and the partials'
// order must not be the hardware's (no atomic combine).
std::string dot_why_not(const ReductionPlan& plan);

// Plans (throws NotRealisable), uploads and runs: the GPU's fp32 result of the schedule.
float reduce(const Schedule& schedule, std::span<const float> values);

}  // namespace fplab::sim::gpu
