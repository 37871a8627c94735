// The exact GEMM and sums (gpu_exact.hpp): a thread an output, its LongAccumulator in the thread's
// local memory. In the GEMM the outputs of a row are neighbours in a warp: B's reads are
// consecutive, A's one address for the warp.
#include "sim/cuda/gpu_exact.hpp"

#include <algorithm>
#include <string>

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/device_buffer.hpp"
#include "sim/cuda/gemm_round_trip.hpp"
#include "sim/cuda/gpu_plan.hpp"
#include "sim/cuda/long_accumulator.hpp"

namespace fplab::sim::gpu {
namespace {

constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads) exact_gemm_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                                              float* __restrict__ c, size_t m, size_t n, size_t k) {
  const size_t outputs = m * n;
  for (size_t o = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < outputs;
       o += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t i = o / n, j = o - i * n;
    LongAccumulator acc;
    const float* row = a + i * k;
    for (size_t t = 0; t < k; ++t) acc.add_product(row[t], b[t * n + j]);
    c[o] = acc.round_to_fp32();
  }
}

__global__ void __launch_bounds__(kThreads) exact_sums_kernel(const float* __restrict__ x, BatchLayout layout,
                                                              float* __restrict__ results) {
  for (size_t o = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < layout.outputs;
       o += static_cast<size_t>(gridDim.x) * blockDim.x) {
    LongAccumulator acc;
    const float* base = x + o * layout.output_stride;
    for (size_t t = 0; t < layout.n; ++t) acc.add_value(base[t * layout.term_stride]);
    results[o] = acc.round_to_fp32();
  }
}

// The same in parts of K: part z of output o accumulates terms [z chunk, (z + 1) chunk) into
// parts[z * outputs + o]; merge_parts adds an output's parts and rounds.
__global__ void __launch_bounds__(kThreads) exact_gemm_parts(const float* __restrict__ a, const float* __restrict__ b,
                                                             LongAccumulator* __restrict__ parts, size_t m, size_t n,
                                                             size_t k, size_t chunk, size_t count) {
  const size_t outputs = m * n;
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < outputs * count;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t z = e / outputs, o = e - z * outputs, i = o / n, j = o - i * n;
    LongAccumulator acc;
    const float* row = a + i * k;
    for (size_t t = z * chunk, end = min(k, t + chunk); t < end; ++t) acc.add_product(row[t], b[t * n + j]);
    parts[e] = acc;
  }
}

__global__ void __launch_bounds__(kThreads) exact_sums_parts(const float* __restrict__ x, BatchLayout layout,
                                                             LongAccumulator* __restrict__ parts, size_t chunk,
                                                             size_t count) {
  const size_t outputs = layout.outputs;
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < outputs * count;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t z = e / outputs, o = e - z * outputs;
    LongAccumulator acc;
    const float* base = x + o * layout.output_stride;
    for (size_t t = z * chunk, end = min(layout.n, t + chunk); t < end; ++t) acc.add_value(base[t * layout.term_stride]);
    parts[e] = acc;
  }
}

__global__ void __launch_bounds__(kThreads) merge_parts(const LongAccumulator* __restrict__ parts, size_t outputs,
                                                        size_t count, float* __restrict__ results) {
  for (size_t o = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < outputs;
       o += static_cast<size_t>(gridDim.x) * blockDim.x) {
    LongAccumulator acc = parts[o];
    for (size_t z = 1; z < count; ++z) acc.merge(parts[z * outputs + o]);
    results[o] = acc.round_to_fp32();
  }
}

// Parts of K for `outputs` sums of k terms: enough threads to fill the GPU where the outputs are
// few and K long (a weight gradient's 36864 outputs over 131072 terms), none where outputs are
// many; parts of at least 1024 terms, their accumulators within a budget of device memory.
size_t parts_for(size_t outputs, size_t k) {
  constexpr size_t kMinChunk = 1024, kWantThreads = size_t{1} << 20, kBudget = size_t{256} << 20;
  if (outputs == 0 || k < 2 * kMinChunk || outputs >= kWantThreads) return 1;
  const size_t by_threads = (kWantThreads + outputs - 1) / outputs, by_length = k / kMinChunk;
  const size_t by_memory = std::max<size_t>(1, kBudget / (outputs * sizeof(LongAccumulator)));
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

}  // namespace

void GpuExact::gemm(const float* a, const float* b, float* c, GemmShape shape) {
  const size_t outputs = shape.m * shape.n;
  if (outputs == 0) return;
  check_terms(shape.k);
  const size_t count = parts_for(outputs, shape.k);
  if (count == 1) {
    exact_gemm_kernel<<<blocks_for(outputs), kThreads>>>(a, b, c, shape.m, shape.n, shape.k);
    FPLAB_CUDA_LAUNCHED("exact_gemm_kernel");
    return;
  }
  const size_t chunk = (shape.k + count - 1) / count;
  auto* parts = parts_.reserve<LongAccumulator>(outputs * count);
  exact_gemm_parts<<<blocks_for(outputs * count), kThreads>>>(a, b, parts, shape.m, shape.n, shape.k, chunk, count);
  FPLAB_CUDA_LAUNCHED("exact_gemm_parts");
  merge_parts<<<blocks_for(outputs), kThreads>>>(parts, outputs, count, c);
  FPLAB_CUDA_LAUNCHED("exact merge_parts");
}

void GpuExact::sums(const float* x, const BatchLayout& layout, float* results) {
  if (layout.outputs == 0) return;
  check_terms(layout.n);
  const size_t count = parts_for(layout.outputs, layout.n);
  if (count == 1) {
    exact_sums_kernel<<<blocks_for(layout.outputs), kThreads>>>(x, layout, results);
    FPLAB_CUDA_LAUNCHED("exact_sums_kernel");
    return;
  }
  const size_t chunk = (layout.n + count - 1) / count;
  auto* parts = parts_.reserve<LongAccumulator>(layout.outputs * count);
  exact_sums_parts<<<blocks_for(layout.outputs * count), kThreads>>>(x, layout, parts, chunk, count);
  FPLAB_CUDA_LAUNCHED("exact_sums_parts");
  merge_parts<<<blocks_for(layout.outputs), kThreads>>>(parts, layout.outputs, count, results);
  FPLAB_CUDA_LAUNCHED("exact merge_parts");
}

std::vector<float> exact_gemm_on_gpu(const float* a, const float* b, GemmShape shape) {
  GpuExact exact;
  return gemm_round_trip(a, b, shape, [&](const float* pa, const float* pb, float* pc) { exact.gemm(pa, pb, pc, shape); });
}

}  // namespace fplab::sim::gpu
