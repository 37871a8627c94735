// The one seeded random stream of the GPU programs (tools/gpu/): fp::CounterRng (Philox4x32-10),
// so that every input a program generates is reproducible from its seed on any machine, and no
// program carries a generator of its own. Nothing here calls libm: gpu_mma_validate --replay
// re-creates the GPU's inputs bit for bit on another machine.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "fp/counter_rng.hpp"

namespace fplab::tools::gpu {

class ToolRng {
 public:
  explicit ToolRng(uint64_t seed) : rng_(seed) {}
  // A stream keyed by several words (e.g. path, input format, test set, tile).
  explicit ToolRng(std::initializer_list<uint64_t> words) : rng_(fp::mix_key(words)) {}

  uint64_t next() { return rng_.next(); }
  uint64_t below(uint64_t n) { return rng_.below(n); }
  double uniform() { return rng_.uniform(); }  // [0, 1), 53 bits
  double normal() {                            // Irwin-Hall: 12 uniforms - 6, no libm
    double s = 0;
    for (int i = 0; i < 12; ++i) s += uniform();
    return s - 6;
  }
  // Uniform in [-1, 1) with 24 random bits: exact in fp32.
  float signed_unit() { return static_cast<float>(next() >> 40) * 0x1p-23f - 1.0f; }

 private:
  fp::CounterRng rng_;
};

// n values uniform in [-1, 1) from `seed` (the benchmarks' operands).
inline std::vector<float> uniform_floats(size_t n, uint64_t seed) {
  ToolRng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = rng.signed_unit();
  return v;
}

}  // namespace fplab::tools::gpu
