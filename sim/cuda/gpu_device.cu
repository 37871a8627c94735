#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/gpu_device.hpp"

namespace fplab::sim::gpu {
namespace {

// in = {0x1.8p-126, 0x1p-126, 0x1p-70, 0x1p-140, -0x1p-127, -0}: read from memory so nothing folds at compile time.
__global__ void subnormal_probe(const float* in, float* out) {
  const float a = in[0], b = in[1], tiny = in[2], sub = in[3];
  const float shuffled = __shfl_down_sync(0xffffffffu, threadIdx.x == 1 ? sub : 0.0f, 1);
  if (threadIdx.x != 0) return;
  out[0] = __fsub_rn(a, b);               // 0x1p-127 unless FADD flushes
  out[1] = __fmaf_rn(tiny, tiny, -0.0f);  // 0x1p-140 unless FFMA flushes
  out[2] = __fmul_rn(tiny, tiny);         // 0x1p-140 unless FMUL flushes
  out[3] = shuffled;
  atomicAdd(&out[4], sub);    // out[4] = -0 before
  atomicAdd(&out[5], in[4]);  // out[5] = 0x1p-126 before, in[4] = -0x1p-127
  atomicAdd(&out[6], in[5]);  // out[6] = -0 before, in[5] = -0
}

}  // namespace

bool device_available(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    if (why)
      // A machine without a driver answers "driver version is insufficient": say so plainly.
      *why = status == cudaSuccess || status == cudaErrorNoDevice ? "no CUDA device"
             : status == cudaErrorInsufficientDriver
                 ? "no CUDA device (no NVIDIA driver here, or one older than the CUDA runtime fplab was built with)"
                 : std::string("no CUDA device (") + cudaGetErrorString(status) + ")";
    cudaGetLastError();  // clear the sticky status for whoever asks next
    return false;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major < 9) {
    if (why) *why = "the CUDA device is older than sm_90, which the kernels are built for";
    return false;
  }
  return true;
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

void use_device(int index) { FPLAB_CUDA(cudaSetDevice(index)); }

int current_device() {
  int device = 0;
  FPLAB_CUDA(cudaGetDevice(&device));
  return device;
}

int current_sm_count() {
  static std::mutex held;
  static std::map<int, int> counts;
  const int device = current_device();
  const std::lock_guard<std::mutex> lock(held);
  auto found = counts.find(device);
  if (found == counts.end()) {
    int sms = 0;
    FPLAB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    found = counts.emplace(device, std::max(sms, 1)).first;
  }
  return found->second;
}

void synchronize_device() { FPLAB_CUDA(cudaDeviceSynchronize()); }

std::string CheckPerDevice::operator()() {
  const std::lock_guard<std::mutex> held(lock_);
  const int device = current_device();
  const auto found = answers_.find(device);
  if (found != answers_.end()) return found->second;
  return answers_[device] = probe_();
}

DeviceInfo device_info() {
  cudaDeviceProp prop{};
  FPLAB_CUDA(cudaGetDeviceProperties(&prop, 0));
  DeviceInfo info;
  info.name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.global_memory = prop.totalGlobalMem;
  info.l2_bytes = prop.l2CacheSize;
  FPLAB_CUDA(cudaDriverGetVersion(&info.driver_version));
  FPLAB_CUDA(cudaRuntimeGetVersion(&info.runtime_version));
  return info;
}

std::string DeviceInfo::describe() const {
  char text[256];
  std::snprintf(text, sizeof text, "%s, sm_%d%d, %d SMs, %.1f GiB, %d MB L2, driver CUDA %d.%d, runtime %d.%d",
                name.c_str(), cc_major, cc_minor, sm_count, static_cast<double>(global_memory) / (1 << 30),
                l2_bytes >> 20, driver_version / 1000, driver_version % 1000 / 10, runtime_version / 1000,
                runtime_version % 1000 / 10);
  return text;
}

SubnormalProbe probe_subnormals() {
  const float in[6] = {0x1.8p-126f, 0x1p-126f, 0x1p-70f, 0x1p-140f, -0x1p-127f, -0.0f};
  const float init[7] = {0, 0, 0, 0, -0.0f, 0x1p-126f, -0.0f};
  float *d_in = nullptr, *d_out = nullptr;
  FPLAB_CUDA(cudaMalloc(&d_in, sizeof in));
  FPLAB_CUDA(cudaMalloc(&d_out, sizeof init));
  float out[7];
  try {
    FPLAB_CUDA(cudaMemcpy(d_in, in, sizeof in, cudaMemcpyHostToDevice));
    FPLAB_CUDA(cudaMemcpy(d_out, init, sizeof init, cudaMemcpyHostToDevice));
    subnormal_probe<<<1, 32>>>(d_in, d_out);
    FPLAB_CUDA_LAUNCHED("subnormal_probe");
    FPLAB_CUDA(cudaMemcpy(out, d_out, sizeof out, cudaMemcpyDeviceToHost));
  } catch (...) {
    cudaFree(d_in);
    cudaFree(d_out);
    throw;
  }
  FPLAB_CUDA(cudaFree(d_in));
  FPLAB_CUDA(cudaFree(d_out));
  SubnormalProbe p;
  p.add = out[0] == 0x1p-127f;
  p.fma = out[1] == 0x1p-140f;
  p.mul = out[2] == 0x1p-140f;
  p.shuffle = out[3] == 0x1p-140f;
  p.atomic_input = out[4] == 0x1p-140f;
  p.atomic_result = out[5] == 0x1p-127f;
  p.atomic_negative_zero = out[6] == 0.0f && std::signbit(out[6]);
  return p;
}

}  // namespace fplab::sim::gpu
