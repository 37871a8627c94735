// A kernel's workspace in device memory: grown when a call needs more, reused otherwise, freed
// with its owner. No CUDA types in this header.
#pragma once

#include <cstddef>

namespace fplab::sim::gpu {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // At least `bytes` (and at least one byte) of device memory; the contents are not kept when it
  // grows. Throws CudaError when the device has no room.
  void* reserve(size_t bytes);
  template <class T>
  T* reserve(size_t count) {
    return static_cast<T*>(reserve(count * sizeof(T)));
  }

  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace fplab::sim::gpu
