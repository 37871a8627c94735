// The parts of K that a GEMM's first stage chains, one FMA chain per part and output: part z of
// `{split(S)|contig(G)}:seq` is terms [z G, min(k, (z + 1) G)); of `each(R)[contig(G):seq]` (tiles
// that restart every R terms: cuDNN's weight gradient per image, docs/schedules.md) the parts of
// every run of R terms in turn, each run cut from its own start, its last part possibly shorter;
// of `strided(P):seq`, whose operands are gathered part by part (gpu_k_order.hpp: part j's terms
// j, j + P, ... made consecutive), P runs of G = K / P terms, the first K mod P of them one longer
// (for K < P: K parts of one term); of `deal(P,B)[...]`, gathered the same way hand by hand
// (hand j the blocks j, j + P, ... of B terms), min(P, ceil(K / B)) runs, the first ceil(K / B) mod P
// of them a block longer and the hand of the last block shorter by what that block lacks.
// No CUDA types: the planner (host code) and the kernels share it.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FPLAB_K_PARTS_HD __host__ __device__
#else
#define FPLAB_K_PARTS_HD
#endif

namespace fplab::sim::gpu {

struct KParts {
  int64_t chunk = 1;    // terms of a part (G)
  int64_t run = 0;      // R of each(R)[...]; 0: K is one run
  int64_t per_run = 1;  // parts of a whole run: ceil(R / G)
  int64_t longer = 0;   // the first `longer` parts hold chunk + unit terms (gathered strided or dealt parts; no runs)
  int64_t unit = 1;     // what a longer part holds more: 1 (strided), a block (dealt)
  int64_t hands = 0;    // dealt parts: their count; 0 otherwise
  int64_t short_part = -1, shortfall = 0;  // dealt parts: the hand of the last block, what that block lacks

  FPLAB_K_PARTS_HD int64_t begin(int64_t z) const {
    if (run) return run_of(z) * run + (z - run_of(z) * per_run) * chunk;
    return z * chunk + (z < longer ? z : longer) * unit - (short_part >= 0 && z > short_part ? shortfall : 0);
  }
  // The end of part z of a sum of k terms.
  FPLAB_K_PARTS_HD int64_t end(int64_t z, int64_t k) const {
    const int64_t limit = run && (run_of(z) + 1) * run < k ? (run_of(z) + 1) * run : k;
    const int64_t stop = begin(z) + chunk + (z < longer ? unit : 0) - (z == short_part ? shortfall : 0);
    return stop < limit ? stop : limit;
  }
  // Parts of a sum of k terms (a last, shorter run has its own, fewer, parts).
  int64_t count(int64_t k) const {
    if (k <= 0) return 0;
    if (hands) return hands;
    if (longer) return (k - longer) / chunk;
    if (!run) return (k + chunk - 1) / chunk;
    return (k / run) * per_run + (k % run + chunk - 1) / chunk;
  }
  // The run of part z. Part indices and per_run are below 2^16 (a launch's gridDim.z): a 32-bit
  // division, where a 64-bit one in a kernel's prologue cost the wide GEMM kernel 36 registers.
  FPLAB_K_PARTS_HD int64_t run_of(int64_t z) const {
    return static_cast<int64_t>(static_cast<uint32_t>(z) / static_cast<uint32_t>(per_run));
  }
  // Every part of a sum of k terms, k a multiple of 4, starts and ends at a multiple of 4 terms
  // (the tiled kernels' float4 loads along K never straddle a part's bounds).
  bool aligned4() const { return chunk % 4 == 0 && run % 4 == 0 && longer == 0 && hands == 0; }
};

#if defined(__CUDACC__)
// One step of an output's chain: the product fused onto the accumulator (an FMA), or, with
// products rounded (products = "rounded": cpu-seq, tpu-v3), the product rounded to fp32 and then
// added. From -0 either gives the rounded first product.
template <bool Rounded>
__device__ __forceinline__ float chain_step(float a, float b, float acc) {
  if constexpr (Rounded)
    return __fadd_rn(acc, __fmul_rn(a, b));
  else
    return __fmaf_rn(a, b, acc);
}
#endif

}  // namespace fplab::sim::gpu
