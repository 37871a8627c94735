// PyTorch's CPU sum of a contiguous float vector (ATen's cascade_sum in SumKernel.cpp, the same
// from torch 1.8 through 2.x), as an order of additions: the reducer `torch_cascade(V)`.
//
// With V the lanes of the vector kernel torch dispatched to (8 for AVX2 and the default build,
// and, measured, for torch 2.11 on an AVX-512 Xeon, whose sum kernel is not an AVX-512 one; 16
// for an AVX-512 kernel), n >= V terms are read as n / V vectors; those are summed four at a time into four
// vector accumulators, each a cascade of four levels (every 2^p rows, p = max(4, ceil(log2 rows) / 4),
// the level's sum is added into the next and restarted, up the levels while the row count is a
// multiple of the level's span); leftover vectors go into the first accumulator, the levels are
// added down into level 0, the four accumulators are added in order, and the result is a float
// from the n mod V last terms added in order, then the vector's V lanes in lane order. Below V
// terms the same cascade runs on single terms. Revealed by fplab reveal for Debian's torch 1.13
// (docs/reveal.md); held to torch.sum bit for bit by python/tests/test_torch_cascade.py.
//
// One departure, by design: torch's accumulators start at +0, fplab's take their first term as it
// is (as every reducer of the grammar does), so an accumulator whose terms are all -0 is -0 here
// and +0 in torch; every other sum is the same bits (x + +0 == x for every other x).
#pragma once

#include <cstddef>

#include "sim/addition_steps.hpp"

namespace fplab::sim {

// The additions of torch_cascade(lanes) over n terms (n >= 1, lanes >= 1).
AdditionSteps torch_cascade_steps(size_t n, int lanes);

}  // namespace fplab::sim
