// GEMMs of the tensor-core models whose fused steps no mma instruction of this GPU computes
// (tc-a100-tf32: 4 products and 24 fraction bits a step; tc-v100, tc-a100, tc-a100-bf16; and
// tc-turing-unconverted, fp32 factors as they are): every step in software on CUDA cores, the
// model's own (fused_grid_step.hpp, and fused_step.hpp outside its form; both held to
// sim::fused_multiply_add bit for bit), 4 x 4 or 2 x 2 outputs a thread. Slower than tensor cores, far
// faster than the host's engine a GPU tensor would otherwise go to. No CUDA types here.
#pragma once

#include <cstdint>
#include <string>

#include "sim/schedule.hpp"

namespace fplab::sim::gpu::detail {

// Every part z < parts of every output (a model fused_steps_why_not of gpu_plan.hpp takes) of C = A B (row-major,
// device memory): the chain of fused steps over K in [z * chunk, min(k, (z + 1) * chunk)) from +0, N products a step
// counted from the part's start, into out[z * m * n + i * n + j]. Enqueued on the default stream. Blocks of 64 x 64
// outputs, or with small_tiles 32 x 32 (four times the blocks, for GEMMs whose blocks would not
// fill the GPU); the same bits either way.
void launch_fused_chains(Reducer::Input factors, int products, int fraction_bits, const float* a, const float* b,
                         float* out, int64_t m, int64_t n, int64_t k, int64_t chunk, unsigned parts, bool small_tiles);

}  // namespace fplab::sim::gpu::detail
