// A GEMM's operands with K in another order, gathered on the device: A's columns and B's rows in
// the order in which a kernel is to read the terms — a first stage that only reorders K (cuDNN's
// TF32 3x3 kernels: each(288)[cols(9)], by kernel position in blocks of channels), or strided(P)
// parts made consecutive (part j's terms j, j + P, ...: cuDNN's input gradient of one chain per
// kernel position). A gather is a copy, without arithmetic, so the GEMM of the gathered operands
// under the rest of the schedule has the bits of the whole schedule's (sim::gemm does the same on
// the CPU). No CUDA types in this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "sim/cuda/device_buffer.hpp"
#include "sim/engine.hpp"

namespace fplab::sim::gpu {

class GpuKOrder {
 public:
  GpuKOrder() = default;
  GpuKOrder(const GpuKOrder&) = delete;
  GpuKOrder& operator=(const GpuKOrder&) = delete;

  // `order` on the device (order[t]: the term read t-th), uploaded on its first use and kept: a
  // network's layers ask for the same few orders at every step.
  const uint32_t* on_device(const std::vector<size_t>& order);

  struct Operands {
    const float* a;
    const float* b;
  };
  // A (m x k, row-major) with column t = A's column order[t] and B (k x n) with row t = B's row
  // order[t], in this object's buffers, valid until the next call; a or b null: not gathered
  // (null returned for it). Enqueued on the default stream.
  Operands gather(const std::vector<size_t>& order, const float* a, const float* b, GemmShape shape);

  size_t workspace_bytes() const;

 private:
  struct Uploaded {
    std::unique_ptr<DeviceBuffer> buffer;
    const uint32_t* order = nullptr;
  };
  std::map<std::vector<size_t>, Uploaded> orders_;
  size_t order_bytes_ = 0;
  DeviceBuffer a_, b_;
};

// The same on the caller's buffers: to (m x k) = from's columns in `order` (a device array of k).
void gather_columns_on_device(const float* from, const uint32_t* order, size_t m, size_t k, float* to);
// to (k x n) = from's rows in `order`.
void gather_rows_on_device(const float* from, const uint32_t* order, size_t k, size_t n, float* to);

}  // namespace fplab::sim::gpu
