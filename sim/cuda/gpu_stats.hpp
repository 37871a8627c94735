// Shared by the validation matrix and tools/gpu/'s programs: comparing fp32 results bit for bit and in ulps, and
// describing a block arrival order against the identity and against a uniform permutation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fplab::sim::gpu::stats {

uint32_t bits(float x);
bool same_bits(float a, float b);  // NaNs of any payload are the same
// Distance in units in the last place, counting +0 and -0 as one value; NaN against a number: -1.
int64_t ulps(float a, float b);

// How far an arrival order (block indices, first to arrive first) is from block order.
struct OrderStats {
  bool identity = false;
  double mean_displacement = 0;  // mean |position - block| (uniform permutation: (B^2 - 1) / 3B)
  int64_t max_displacement = 0;
  double inversions = 0;  // fraction of block pairs out of order (uniform: 0.5)
  // With a wave of `wave` blocks (those the device holds at once; block b is in wave b / wave):
  double wave_inversions = 0;  // fraction of pairs of one wave out of order (uniform: 0.5)
  double same_wave = 0;        // fraction of blocks arriving at a position of their own wave
};
OrderStats order_stats(const std::vector<int32_t>& order, int64_t wave = 0);

std::string fixed(double x, int digits);

}  // namespace fplab::sim::gpu::stats
