// The GPU compute backend: every fp32 GEMM and sum over a leading axis of training runs in our
// CUDA kernels (sim/cuda/) under the op's schedule. For a deterministic schedule the kernels give
// the CPU engine's bits (docs/gpu.md), so a whole training run ends with the CPU replay's weights;
// an `all:atomic` step adds in the order the hardware delivers (real implementation noise, not
// the impl seed's). Built only where nvcc is (CMake target models_gpu); runs only where a GPU is.
//
// What it runs: the schedules gpu::plan_any_gemm (fwd, dgrad, wgrad: FMA chains, the H100's
// tensor-core models on a Hopper GPU that passes gpu::tensor_core_gemm_why_not's check, and the
// other tensor-core models' fused steps in software on CUDA cores, on any GPU) and
// gpu::plan_reduction (bias_grad, bn_stats, softmax, loss) accept, in fp32 with round to nearest even, subnormals kept, no
// saturation, and fused products for the GEMMs; convolutions' im2col and col2im (sim/cuda/gpu_conv)
// around their forward and input-gradient GEMMs. What stays on the CPU: see compute_backend.hpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/compute_backend.hpp"
#include "profiles/op_table.hpp"

namespace fplab::models {

// Why the GPU backend cannot run `table`: one line per op kind it cannot run ("bias_grad: schedule
// 'all:tree' is not realisable by the GPU reduction kernel: ..."), then one per layer rule's op kind
// ("wgrad in layer rule 2 (conv kernel=3 height=28): ..."); empty when it can run them all.
// Needs no GPU (tensor-core GEMMs are then refused with the device's reason).
std::vector<std::string> gpu_unsupported_ops(const profiles::OpTable& table);

// The backend on CUDA device 0. Throws std::runtime_error with one line when no usable device is
// there ("no CUDA device") or when gpu_unsupported_ops(table) is not empty (its first line).
std::unique_ptr<ComputeBackend> make_gpu_backend(const profiles::OpTable& table);

}  // namespace fplab::models
