// fp32 GEMM on a Hopper GPU's own tensor cores, in the order and arithmetic of a tensor-core
// schedule (gpu_plan.hpp, plan_tensor_core_gemm): every output is a chain of mma.sync
// instructions along K, each adding 8 (tf32) or 16 (bf16, fp16) products and the previous
// result in one fused step, exactly sim::fused_dot with the tc-h100-* models (sim::gemm's bits);
// split-K parts each such a chain from +0, added in order in fp32.
//
// The chip and the model differ in two measured rules (docs/results/tensor-cores-h100.md): an
// instruction whose truncated sum reaches 2^128 gives inf where the model saturates, and a zero
// result is always +0 where the model can give -0; NaNs have the chip's bits. All three leave a
// zero, infinite or NaN result that lasts to the end of a stage (32 or 64 products), so wherever a
// warp's 16 x 8 results hold any of them after a stage, the warp computes that stage's
// instructions again in software, the model's fused step on CUDA cores, from the accumulators of
// the stage's start: every output is then the model's (gpu_tensor_core_gemm.cu says why).
// Row-major A (m x k), B (k x n), C (m x n), device memory. No CUDA types in this header.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/cuda/device_buffer.hpp"
#include "sim/cuda/gpu_k_order.hpp"
#include "sim/cuda/gpu_plan.hpp"
#include "sim/cuda/gpu_seeded.hpp"
#include "sim/engine.hpp"
#include "sim/noise.hpp"

namespace fplab::sim::gpu {

// Why the current device's tensor cores cannot run the kernel ("" where they can): only a Hopper
// GPU (compute capability 9.x) is the chip the tc-h100-* models were measured on, and only one
// whose results on a fixed probe set equal sim::gemm's (gpu_tensor_core_check.cpp) is trusted.
std::string tensor_core_gemm_why_not();
// The first part alone (no probe run): whether there is a Hopper GPU.
std::string tensor_core_gemm_device_why_not();

// The kernel's blocks: 64 x 64 outputs (wide) or 32 x 16 (narrow: many more blocks for a GEMM of
// few outputs; the fused steps on CUDA cores take 32 x 32 then); chosen by shape, the same bits
// either way.
enum class TensorCoreBlock { wide, narrow };

class GpuTensorCoreGemm {
 public:
  GpuTensorCoreGemm() = default;
  GpuTensorCoreGemm(const GpuTensorCoreGemm&) = delete;
  GpuTensorCoreGemm& operator=(const GpuTensorCoreGemm&) = delete;

  // C = A B on the caller's device memory (a, b, c device pointers to dense row-major matrices; c
  // must not overlap a or b). Enqueued on the default stream; returns without waiting. Split-K
  // parts are added in order (an atomic combine's parts too: run_seeded_on_device draws theirs).
  void run_on_device(const TensorCoreGemmPlan& plan, const float* a, const float* b, float* c, GemmShape shape);
  // The same with split-K parts combined by atomics (`split(S):fused(...) | all:atomic`: rtx5000-tc's
  // weight gradients) in the emulation's order: the parts written to the workspace, then folded by
  // `fold` in the permutation each output tile draws from `key`, as sim::gemm folds them. Other
  // plans run as run_on_device runs them.
  void run_seeded_on_device(const TensorCoreGemmPlan& plan, GpuSeededReduction& fold, const NoiseKey& key,
                            const float* a, const float* b, float* c, GemmShape shape);

  // The same for operands anywhere (fplab train's GPU backend): a, b and c each a host or a device
  // pointer (unified addressing tells which); copied through the object's buffers, and waited for.
  void run_unified(const TensorCoreGemmPlan& plan, const float* a, const float* b, float* c, GemmShape shape);

  size_t workspace_bytes() const {
    return parts_.bytes() + fold_orders_.workspace_bytes() + k_order_.workspace_bytes() + a_.bytes() + b_.bytes() +
           c_.bytes();
  }

  // Tests: every GEMM in these blocks, whatever its shape (none: by shape).
  void force_block(std::optional<TensorCoreBlock> block) { forced_block_ = block; }

 private:
  // Every part's chains of the shape into target (count x m x n floats; C itself for one part).
  void write_parts(const TensorCoreGemmPlan& plan, const float* a, const float* b, float* target, GemmShape shape,
                   const KParts& parts, int64_t count);

  std::optional<TensorCoreBlock> forced_block_;
  DeviceBuffer parts_;   // split-K parts
  GpuKOrder fold_orders_;    // the orders the parts are added in, where not theirs (on the device, kept)
  GpuKOrder k_order_;        // dealt parts' operands, gathered hand by hand
  DeviceBuffer a_, b_, c_;  // run_unified's operands
};

// Factors for the check and the tests: 2^e * N(0, 1) with e uniform in [lo, hi], a share `zeros`
// of them +0 or -0 and a share `specials` NaN or +-inf, from the seed.
std::vector<float> tensor_core_probe_values(size_t count, uint64_t seed, int lo, int hi, double zeros,
                                            double specials);

// Plans (throws NotRealisable), uploads A and B, runs and waits: C on the host (tests, tools); in
// `block` where given, else by shape.
std::vector<float> tensor_core_gemm(const Schedule& schedule, const float* a, const float* b, GemmShape shape,
                                    std::optional<TensorCoreBlock> block = std::nullopt, const NoiseKey& key = {});

}  // namespace fplab::sim::gpu
