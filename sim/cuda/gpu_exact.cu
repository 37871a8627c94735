// The exact GEMM and sums (gpu_exact.hpp): each output's terms first in a certified double sum
// (certified_sum.hpp: a product and eight double additions a term) — the GEMM's in tiles of 32 x 32
// outputs, 2 x 2 a thread, its factors staged in shared memory as doubles; a batch's sums a thread
// an output — and where that cannot certify its rounding (a sum near an fp32 midpoint, an exact
// zero's sign unknown, infinities, NaNs), the same terms again in a LongAccumulator in the
// thread's local memory.
#include "sim/cuda/gpu_exact.hpp"

#include <algorithm>
#include <string>

#include "sim/cuda/certified_sum.hpp"
#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/device_buffer.hpp"
#include "sim/cuda/gemm_round_trip.hpp"
#include "sim/cuda/gpu_plan.hpp"
#include "sim/cuda/long_accumulator.hpp"

namespace fplab::sim::gpu {
namespace {

constexpr int kThreads = 128;

// Output o's terms [begin, end) of the GEMM (products) or of the batch (values), added to Sum.
struct GemmTerms {
  const float* a;
  const float* b;
  size_t n, k;
  template <class Sum>
  __device__ void add(Sum& sum, size_t o, size_t begin, size_t end) const {
    const size_t i = o / n, j = o - i * n;
    const float* row = a + i * k;
    for (size_t t = begin; t < end; ++t) sum.add_product(row[t], b[t * n + j]);
  }
  __device__ size_t count() const { return k; }
};
struct BatchTerms {
  const float* x;
  BatchLayout layout;
  template <class Sum>
  __device__ void add(Sum& sum, size_t o, size_t begin, size_t end) const {
    const float* base = x + o * layout.output_stride;
    for (size_t t = begin; t < end; ++t) sum.add_value(base[t * layout.term_stride]);
  }
  __device__ size_t count() const { return layout.n; }
};

// Output o's sum rounded to fp32 from its certified sum, or from all its terms again exactly (kept
// out of line: rare, and its accumulator lives in local memory).
template <class Terms>
__device__ __noinline__ float exact_again(const Terms& terms, size_t o) {
  LongAccumulator acc;
  terms.add(acc, o, 0, terms.count());
  return acc.round_to_fp32();
}
template <class Terms>
__device__ float rounded(const CertifiedSum& sum, const Terms& terms, size_t o) {
  float result;
  return sum.rounded_to_fp32(&result) ? result : exact_again(terms, o);
}

// A batch's sums, a thread an output.
template <class Terms>
__global__ void __launch_bounds__(kThreads) exact_kernel(Terms terms, size_t outputs, float* __restrict__ results) {
  for (size_t o = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < outputs;
       o += static_cast<size_t>(gridDim.x) * blockDim.x) {
    CertifiedSum sum;
    terms.add(sum, o, 0, terms.count());
    results[o] = rounded(sum, terms, o);
  }
}

// The GEMM's certified sums in tiles: a block of 16 x 16 threads computes 32 x 32 outputs of part z
// (K in [z chunk, (z + 1) chunk)), each thread 2 x 2 of them, the factors staged in shared memory 32
// terms at a time, converted to doubles once there (not once a product); the blocks stride over the
// tiles (any shape fits the grid). kParts: each output's certified sum goes to parts[z * m * n + o]
// for merge_parts; otherwise its rounding to results.
constexpr int kTile = 32, kTileStage = 32, kTileThreads = 256;

template <bool kParts>
__global__ void __launch_bounds__(kTileThreads)
    exact_gemm_tiles(GemmTerms terms, size_t m, size_t chunk, float* __restrict__ results,
                     CertifiedSum* __restrict__ parts) {
  __shared__ double sa[kTileStage][kTile + 1];  // sa[t][row]
  __shared__ double sb[kTileStage][kTile + 1];  // sb[t][column]
  const size_t n = terms.n, k = terms.k;
  const size_t col_tiles = (n + kTile - 1) / kTile, tiles = (m + kTile - 1) / kTile * col_tiles;
  const int thread = threadIdx.x, tx = thread % 16, ty = thread / 16;
  const size_t begin = blockIdx.z * chunk, end = min(k, begin + chunk);
  for (size_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const size_t row0 = tile / col_tiles * kTile, col0 = tile % col_tiles * kTile;
    CertifiedSum sum[2][2];
    for (size_t k0 = begin; k0 < end; k0 += kTileStage) {
      const int live = static_cast<int>(min(end - k0, static_cast<size_t>(kTileStage)));
      for (int i = thread; i < kTile * kTileStage; i += kTileThreads) {
        const int r = i / kTileStage, t = i % kTileStage;  // A's row r, term t: consecutive threads, consecutive terms
        sa[t][r] = row0 + r < m && t < live ? terms.a[(row0 + r) * k + k0 + t] : 0.0f;
        const int s = i / kTile, c = i % kTile;  // B's term s, column c
        sb[s][c] = col0 + c < n && s < live ? terms.b[(k0 + s) * n + col0 + c] : 0.0f;
      }
      __syncthreads();
      for (int t = 0; t < live; ++t) {
        const double x[2] = {sa[t][2 * ty], sa[t][2 * ty + 1]}, y[2] = {sb[t][2 * tx], sb[t][2 * tx + 1]};
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int c = 0; c < 2; ++c) sum[r][c].add_product(x[r], y[c]);
      }
      __syncthreads();
    }
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 2; ++c) {
        const size_t row = row0 + 2 * ty + r, col = col0 + 2 * tx + c;
        if (row >= m || col >= n) continue;
        const size_t o = row * n + col;
        if constexpr (kParts)
          parts[blockIdx.z * m * n + o] = sum[r][c];
        else
          results[o] = rounded(sum[r][c], terms, o);
      }
  }
}

// exact_kernel's sums in parts of K: part z of output o sums terms [z chunk, (z + 1) chunk) into
// parts[z * outputs + o]; merge_parts adds an output's parts and rounds (either kernel's parts).
template <class Terms>
__global__ void __launch_bounds__(kThreads)
    exact_parts(Terms terms, size_t outputs, CertifiedSum* __restrict__ parts, size_t chunk, size_t count) {
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < outputs * count;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t z = e / outputs, o = e - z * outputs, begin = z * chunk;
    CertifiedSum sum;
    terms.add(sum, o, begin, min(terms.count(), begin + chunk));
    parts[e] = sum;
  }
}

template <class Terms>
__global__ void __launch_bounds__(kThreads) merge_parts(Terms terms, const CertifiedSum* __restrict__ parts,
                                                        size_t outputs, size_t count, float* __restrict__ results) {
  for (size_t o = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < outputs;
       o += static_cast<size_t>(gridDim.x) * blockDim.x) {
    CertifiedSum sum = parts[o];
    for (size_t z = 1; z < count; ++z) sum.merge(parts[z * outputs + o]);
    results[o] = rounded(sum, terms, o);
  }
}

// Parts of K for `outputs` sums of k terms: enough threads to fill the GPU where the outputs are
// few and K long (a weight gradient's 36864 outputs over 131072 terms), none where outputs are
// many; parts of at least 1024 terms, their accumulators within a budget of device memory.
size_t parts_for(size_t outputs, size_t k) {
  constexpr size_t kMinChunk = 1024, kWantThreads = size_t{1} << 20, kBudget = size_t{256} << 20;
  if (outputs == 0 || k < 2 * kMinChunk || outputs >= kWantThreads) return 1;
  const size_t by_threads = (kWantThreads + outputs - 1) / outputs, by_length = k / kMinChunk;
  const size_t by_memory = std::max<size_t>(1, kBudget / (outputs * sizeof(CertifiedSum)));
  return std::max<size_t>(1, std::min({by_threads, by_length, by_memory, size_t{64}}));
}

unsigned blocks_for(size_t outputs) {
  return static_cast<unsigned>(std::clamp<size_t>((outputs + kThreads - 1) / kThreads, 1, size_t{1} << 20));
}

// A long accumulator's digits hold the carries of at most 2^31 terms (long_accumulator.hpp).
void check_terms(size_t terms) {
  if (terms >= (size_t{1} << 31))
    throw NotRealisable("an exact sum of " + std::to_string(terms) + " terms on the GPU (at most 2^31 - 1)");
}

// Every output's terms summed exactly and rounded: whole() launches the one-pass kernel, or, where
// parts of K fill the GPU better, in_parts(parts, chunk, count) the parts' kernel (their certified
// sums in `workspace`) and merge_parts rounds.
template <class Terms, class Whole, class InParts>
void run_exact(DeviceBuffer& workspace, const Terms& terms, size_t outputs, size_t k, float* results, Whole whole,
               InParts in_parts) {
  if (outputs == 0) return;
  check_terms(k);
  const size_t count = parts_for(outputs, k);
  if (count == 1) return whole();
  const size_t chunk = (k + count - 1) / count;
  auto* parts = workspace.reserve<CertifiedSum>(outputs * count);
  in_parts(parts, chunk, count);
  merge_parts<<<blocks_for(outputs), kThreads>>>(terms, parts, outputs, count, results);
  FPLAB_CUDA_LAUNCHED("exact merge_parts");
}

}  // namespace

void GpuExact::gemm(const float* a, const float* b, float* c, GemmShape shape) {
  const GemmTerms terms{a, b, shape.n, shape.k};
  const size_t tiles = (shape.m + kTile - 1) / kTile * ((shape.n + kTile - 1) / kTile);
  const auto blocks = static_cast<unsigned>(std::clamp<size_t>(tiles, 1, size_t{1} << 20));
  run_exact(
      parts_, terms, shape.m * shape.n, shape.k, c,
      [&] {
        exact_gemm_tiles<false><<<blocks, kTileThreads>>>(terms, shape.m, shape.k, c, nullptr);
        FPLAB_CUDA_LAUNCHED("exact GEMM");
      },
      [&](CertifiedSum* parts, size_t chunk, size_t count) {
        exact_gemm_tiles<true>
            <<<dim3(blocks, 1, static_cast<unsigned>(count)), kTileThreads>>>(terms, shape.m, chunk, nullptr, parts);
        FPLAB_CUDA_LAUNCHED("exact GEMM in parts");
      });
}

void GpuExact::sums(const float* x, const BatchLayout& layout, float* results) {
  const BatchTerms terms{x, layout};
  run_exact(
      parts_, terms, layout.outputs, layout.n, results,
      [&] {
        exact_kernel<<<blocks_for(layout.outputs), kThreads>>>(terms, layout.outputs, results);
        FPLAB_CUDA_LAUNCHED("exact sums");
      },
      [&](CertifiedSum* parts, size_t chunk, size_t count) {
        exact_parts<<<blocks_for(layout.outputs * count), kThreads>>>(terms, layout.outputs, parts, chunk, count);
        FPLAB_CUDA_LAUNCHED("exact sums in parts");
      });
}

std::vector<float> exact_gemm_on_gpu(const float* a, const float* b, GemmShape shape) {
  GpuExact exact;
  return gemm_round_trip(a, b, shape, [&](const float* pa, const float* pb, float* pc) { exact.gemm(pa, pb, pc, shape); });
}

}  // namespace fplab::sim::gpu
