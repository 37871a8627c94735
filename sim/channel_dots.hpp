// Per channel the dot product of two float32 tensors laid out (outer, channels, inner), over the
// outer x inner terms in the order t = o * inner + i, each a 1 x n by n x 1 sim::gemm with a noise
// key of its own: a batch norm's variance and gamma gradient in cuDNN's form, whose squares and
// products are fused into its sums' chains. models/batch_norm.cpp (rows (n, C): inner 1) and
// fplab._core.dot_planes (planes (B, C, P)) both call it, so that fplab train and fplab.torch
// cannot part here.
#pragma once

#include <cstddef>
#include <span>

#include "sim/arithmetic.hpp"
#include "sim/noise.hpp"
#include "sim/schedule.hpp"

namespace fplab::sim {

struct ChannelLayout {
  size_t outer, channels, inner;
};

// out[c] for every channel c; keys[c] keys channel c (keys.size() == layout.channels).
void channel_dots(const Schedule& schedule, const Arithmetic& arithmetic, const float* a, const float* b,
                  ChannelLayout layout, std::span<const NoiseKey> keys, float* out);

}  // namespace fplab::sim
