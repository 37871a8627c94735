// fp32 GEMM on CUDA cores whose reduction over K follows a schedule (gpu_plan.hpp): every output
// is an FMA chain acc = fmaf(a[i,t], b[t,j], acc) over its part of K, in K order, starting from
// the rounded first product (exactly sim::gemm with fp32/rne/fused); split-K parts are combined
// in order, by a balanced tree, by atomicAdd, or in the order an impl seed draws
// (run_seeded_on_device). Row-major A (m x k), B (k x n), C (m x n).
// No CUDA types in this header.
#pragma once

#include <optional>
#include <vector>

#include "sim/cuda/gpu_gemm_tiled.hpp"
#include "sim/cuda/gpu_k_order.hpp"
#include "sim/cuda/gpu_plan.hpp"
#include "sim/cuda/gpu_seeded.hpp"
#include "sim/engine.hpp"
#include "sim/noise.hpp"

namespace fplab::sim::gpu {

struct GpuGemmProbe;

class GpuGemm {
 public:
  // How an ordered split-K (`split(S):seq | all:seq`, `splitk(S)`, ...) combines its parts; every
  // form gives the same bits, ((p0 + p1) + p2) + ... (gpu_gemm.cu says how each works).
  // by_shape: the fastest form measured for the shape's regime (docs/results/gpu.md, section 8).
  enum class OrderedForm { by_shape, last_folds, two_passes, serial };
  static const char* form_name(OrderedForm form);

  GpuGemm() = default;
  GpuGemm(const float* a, const float* b, GemmShape shape);  // copies A and B to the device
  ~GpuGemm();
  GpuGemm(const GpuGemm&) = delete;
  GpuGemm& operator=(const GpuGemm&) = delete;

  // Copies new A and B (of any shape) to the device, growing the buffers only when they must.
  void load(const float* a, const float* b, GemmShape shape);
  void run(const GemmPlan& plan, float* c);  // c: m x n on the host
  // run with an atomic combine in the order `key` draws (run_seeded_on_device), on the loaded A, B.
  void run_seeded(const GemmPlan& plan, GpuSeededReduction& fold, const NoiseKey& key, float* c);
  // Blocks of the GEMM kernel the device holds at once (picks the ordered split-K combine).
  static int64_t resident_blocks();
  // The output tile a plan's chains run in on the loaded shape (a, b: where its operands are): the
  // one forced through GpuGemmProbe, else by shape (detail::chain_tile_for). Only for chains written
  // out (one part, parts to a workspace, an atomic combine); the other ordered forms are 64 x 64.
  detail::ChainTile tile_for(const GemmPlan& plan, const float* a, const float* b) const;
  detail::ChainTile batched_tile(const GemmPlan& plan, const float* a, const float* b) const;
  // Bytes of device memory this object holds (operands, result, split-K parts, tickets).
  size_t workspace_bytes() const;
  // The form an ordered split-K of the loaded shape takes under `plan`: the one forced through
  // GpuGemmProbe (benchmarks, tests), or by shape (and by the tile the operands a, b allow; the
  // first: the loaded ones).
  OrderedForm ordered_form(const GemmPlan& plan) const;
  OrderedForm ordered_form(const GemmPlan& plan, const float* a, const float* b) const;
  // load + run for operands that may already be on the device (a convolution's columns, gpu_conv):
  // a, b and c may each be a host or a device pointer; cudaMemcpyDefault tells which from the
  // address (unified addressing), and copies a device one on the device.
  void run_unified(const GemmPlan& plan, const float* a, const float* b, float* c, GemmShape shape);
  // C = A B on the caller's device memory, without copies (fplab.torch's CUDA tensors): a, b and c
  // device pointers to row-major, densely packed matrices; c must not overlap a or b. Enqueued on
  // the default stream; returns without waiting. A, B and C are not kept: load() before run()
  // again.
  void run_on_device(const GemmPlan& plan, const float* a, const float* b, float* c, GemmShape shape);
  // run_on_device for `batches` GEMMs of one shape, GEMM z on a + z * a_step and b + z * b_step into
  // c + z * m * n: one launch of the 16 x 32 kernel where the plan is one FMA chain an output over
  // K and that tile is the one its shape takes (the transformed GEMMs of a Winograd weight
  // gradient: few outputs, a long K), else run_on_device once a GEMM. The same bits either way.
  void run_batched_on_device(const GemmPlan& plan, const float* a, const float* b, float* c, GemmShape shape,
                             size_t batches, int64_t a_step, int64_t b_step);
  // run_on_device with an atomic combine (`split(S):seq | all:atomic`, ...) in the emulation's
  // order instead of the hardware's: the parts written to the workspace, then folded by `fold` in
  // the permutation each output tile draws from `key` (GpuSeededReduction::fold_gemm_parts), so
  // that C is sim::gemm's with that key, bit for bit. Other plans run as run_on_device runs them.
  void run_seeded_on_device(const GemmPlan& plan, GpuSeededReduction& fold, const NoiseKey& key, const float* a,
                            const float* b, float* c, GemmShape shape);

 private:
  friend struct GpuGemmProbe;  // timing, forced forms, the serial timeline (gpu_gemm_probe.hpp)
  void launch(const GemmPlan& plan);  // on the loaded A and B, into the device's C
  // seeded: where an atomic combine's parts go to be folded in the emulation's order (else
  // atomicAdd); first_row: the slab's first row in the whole GEMM (launch_seeded)
  struct SeededCombine {
    GpuSeededReduction* fold;
    NoiseKey key;
    size_t first_row;
  };
  void launch(const GemmPlan& plan, const float* a, const float* b, float* c, const SeededCombine* seeded = nullptr);
  // launch with the seeded combine, in slabs of rows where the parts would pass their budget.
  void launch_seeded(const GemmPlan& plan, GpuSeededReduction& fold, const NoiseKey& key, const float* a,
                     const float* b, float* c);

  GemmShape shape_{};
  OrderedForm forced_ = OrderedForm::by_shape;
  std::optional<detail::ChainTile> forced_tile_;
  float *a_ = nullptr, *b_ = nullptr, *c_ = nullptr, *parts_ = nullptr;
  unsigned* tickets_ = nullptr;  // the ordered split-K combine's flags / tickets, one per output tile
  GpuKOrder k_order_;            // strided parts' operands, gathered part by part
  size_t a_capacity_ = 0, b_capacity_ = 0, c_capacity_ = 0, parts_capacity_ = 0, tickets_capacity_ = 0;
};

// Plans (throws NotRealisable), uploads and runs; rounded_products: each product rounded before
// it is added (sim::gemm with products = "rounded").
void gemm(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape,
          bool rounded_products = false);
// `batches` GEMMs of one shape (A z at a + z * m * k, B z at b + z * k * n, C z at c + z * m * n,
// host memory) through run_batched_on_device: uploaded, run, waited for and downloaded (tests).
void gemm_batched(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape, size_t batches);
// The same with an atomic combine in the order the key draws: sim::gemm(..., key)'s bits.
void gemm_seeded(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape,
                 const NoiseKey& key, bool rounded_products = false);

// Why the seeded split-K GEMM (run_seeded_on_device) is not to be used on the current device, or
// "": before its first use there, split-K GEMMs with an atomic combine on ragged shapes and
// several seeds against sim::gemm on the CPU, bit for bit (cached per device and process; a
// difference or a kernel error is the reason, and fplab.torch then runs those GEMMs on the CPU).
std::string seeded_gemm_why_not();

}  // namespace fplab::sim::gpu
