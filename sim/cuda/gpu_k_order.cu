// Gathers along K (gpu_k_order.hpp): a thread a destination element, the reads through the order.
#include "sim/cuda/gpu_k_order.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/gpu_plan.hpp"

namespace fplab::sim::gpu {
namespace {

constexpr int kThreads = 256;

// to[i, t] = from[i, order[t]] over m x k; the writes run along rows.
__global__ void gather_columns(const float* __restrict__ from, const uint32_t* __restrict__ order, int64_t m,
                               int64_t k, float* __restrict__ to) {
  const int64_t count = m * k;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / k, t = e - i * k;
    to[e] = from[i * k + order[t]];
  }
}

// to[t, j] = from[order[t], j] over k x n.
__global__ void gather_rows(const float* __restrict__ from, const uint32_t* __restrict__ order, int64_t k, int64_t n,
                            float* __restrict__ to) {
  const int64_t count = k * n;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = e / n, j = e - t * n;
    to[e] = from[static_cast<int64_t>(order[t]) * n + j];
  }
}

unsigned blocks_for(int64_t count) {
  return static_cast<unsigned>(std::clamp<int64_t>((count + kThreads - 1) / kThreads, 1, int64_t{1} << 20));
}

}  // namespace

void gather_columns_on_device(const float* from, const uint32_t* order, size_t m, size_t k, float* to) {
  const auto count = static_cast<int64_t>(m * k);
  if (count == 0) return;
  gather_columns<<<blocks_for(count), kThreads>>>(from, order, static_cast<int64_t>(m), static_cast<int64_t>(k), to);
  FPLAB_CUDA_LAUNCHED("gather_columns");
}

void gather_rows_on_device(const float* from, const uint32_t* order, size_t k, size_t n, float* to) {
  const auto count = static_cast<int64_t>(k * n);
  if (count == 0) return;
  gather_rows<<<blocks_for(count), kThreads>>>(from, order, static_cast<int64_t>(k), static_cast<int64_t>(n), to);
  FPLAB_CUDA_LAUNCHED("gather_rows");
}

const uint32_t* GpuKOrder::on_device(const std::vector<size_t>& order) {
  Uploaded& slot = orders_[order];
  if (!slot.buffer) {
    if (order.size() > UINT32_MAX) {
      orders_.erase(order);
      throw NotRealisable("a GEMM gathered along K of " + std::to_string(order.size()) + " terms (at most 2^32 - 1)");
    }
    const std::vector<uint32_t> narrow(order.begin(), order.end());
    auto buffer = std::make_unique<DeviceBuffer>();
    uint32_t* device = buffer->reserve<uint32_t>(narrow.size());
    FPLAB_CUDA(cudaMemcpy(device, narrow.data(), narrow.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
    order_bytes_ += buffer->bytes();
    slot = {std::move(buffer), device};
  }
  return slot.order;
}

GpuKOrder::Operands GpuKOrder::gather(const std::vector<size_t>& order, const float* a, const float* b,
                                      GemmShape shape) {
  const uint32_t* device_order = on_device(order);
  Operands out{nullptr, nullptr};
  if (a) {
    float* to = a_.reserve<float>(shape.m * shape.k);
    gather_columns_on_device(a, device_order, shape.m, shape.k, to);
    out.a = to;
  }
  if (b) {
    float* to = b_.reserve<float>(shape.k * shape.n);
    gather_rows_on_device(b, device_order, shape.k, shape.n, to);
    out.b = to;
  }
  return out;
}

size_t GpuKOrder::workspace_bytes() const { return order_bytes_ + a_.bytes() + b_.bytes(); }

}  // namespace fplab::sim::gpu
