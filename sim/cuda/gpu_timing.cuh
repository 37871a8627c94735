// Internal to sim/cuda/: timing device work the way METHOD.md asks — warm-ups, then device events
// around each call, the median of the runs.
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include "sim/cuda/cuda_check.cuh"

namespace fplab::sim::gpu::detail {

// Median milliseconds of `reps` event-timed calls of f (on the default stream) after `warmups`.
inline double median_ms(const std::function<void()>& f, int reps, int warmups = 3) {
  for (int w = 0; w < warmups; ++w) f();
  FPLAB_CUDA(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  FPLAB_CUDA(cudaEventCreate(&start));
  FPLAB_CUDA(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int r = 0; r < reps; ++r) {
    FPLAB_CUDA(cudaEventRecord(start));
    f();
    FPLAB_CUDA(cudaEventRecord(stop));
    FPLAB_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    FPLAB_CUDA(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times.empty() ? 0 : times[times.size() / 2];
}

}  // namespace fplab::sim::gpu::detail
