// For tests and tools: a GEMM kernel run on host matrices — A and B copied to the device, `run`
// called with the device copies and a device C, C copied back (and waited for). No CUDA types.
#pragma once

#include <functional>
#include <vector>

#include "sim/engine.hpp"

namespace fplab::sim::gpu {

std::vector<float> gemm_round_trip(const float* a, const float* b, GemmShape shape,
                                   const std::function<void(const float* a, const float* b, float* c)>& run);

}  // namespace fplab::sim::gpu
