// Internal to sim/cuda/: every CUDA call's status checked, launches included (a failed launch
// only shows in cudaGetLastError).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "sim/cuda/gpu_device.hpp"

namespace fplab::sim::gpu::detail {

inline void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  // The runtime also keeps a failed call's status as its "last error": left there, it would be
  // reported again by the next launch's check (FPLAB_CUDA_LAUNCHED), blaming a kernel that ran
  // fine. Reading it clears it (sticky errors stay, as they should).
  (void)cudaGetLastError();
  throw CudaError(std::string(what) + ": " + cudaGetErrorString(status));
}

}  // namespace fplab::sim::gpu::detail

#define FPLAB_CUDA(call) ::fplab::sim::gpu::detail::check((call), #call)
#define FPLAB_CUDA_LAUNCHED(what) ::fplab::sim::gpu::detail::check(cudaGetLastError(), what)
