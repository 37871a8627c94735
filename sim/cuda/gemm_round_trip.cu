#include "sim/cuda/gemm_round_trip.hpp"

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/device_buffer.hpp"

namespace fplab::sim::gpu {

std::vector<float> gemm_round_trip(const float* a, const float* b, GemmShape shape,
                                   const std::function<void(const float*, const float*, float*)>& run) {
  DeviceBuffer da, db, dc;
  float* const pa = da.reserve<float>(shape.m * shape.k);
  float* const pb = db.reserve<float>(shape.k * shape.n);
  float* const pc = dc.reserve<float>(shape.m * shape.n);
  if (shape.m * shape.k) FPLAB_CUDA(cudaMemcpy(pa, a, shape.m * shape.k * sizeof(float), cudaMemcpyHostToDevice));
  if (shape.k * shape.n) FPLAB_CUDA(cudaMemcpy(pb, b, shape.k * shape.n * sizeof(float), cudaMemcpyHostToDevice));
  run(pa, pb, pc);
  std::vector<float> c(shape.m * shape.n);
  if (!c.empty()) FPLAB_CUDA(cudaMemcpy(c.data(), pc, c.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return c;
}

}  // namespace fplab::sim::gpu
