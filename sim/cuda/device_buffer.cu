#include "sim/cuda/device_buffer.hpp"

#include <algorithm>

#include "sim/cuda/cuda_check.cuh"

namespace fplab::sim::gpu {

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);  // no throwing from a destructor; the runtime may already be gone at exit
}

void* DeviceBuffer::reserve(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  if (bytes > bytes_) {
    if (data_) FPLAB_CUDA(cudaFree(data_));
    data_ = nullptr;
    bytes_ = 0;
    FPLAB_CUDA(cudaMalloc(&data_, bytes));
    bytes_ = bytes;
  }
  return data_;
}

}  // namespace fplab::sim::gpu
