// gpu_reciprocal_table: the GPU's approximate reciprocal (PTX rcp.approx.ftz.f32, the MUFU.RCP a
// kernel compiled with fast division uses) on every float of [1, 2), against the correctly rounded
// 1/x. cuDNN's BatchNorm kernel for 28x28 inputs divides its Welford updates by it
// (docs/results/calibration_torch.md): the model needs its values at the counts 1 .. N.
// Prints the distribution of the differences (in ulps), the counts whose reciprocal differs from
// the correctly rounded one, and with --out writes the 2^23 differences as int8, entry i for the
// float of bits 0x3f800000 | i (rcp(x 2^k) = rcp(x) 2^-k for normal results).
//
//   gpu_reciprocal_table [--integers N] [--out FILE]
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "sim/cuda/cuda_check.cuh"
#include "tools/gpu/tool_cli.hpp"
#include "tools/gpu/tool_device.hpp"

namespace {

constexpr uint32_t kSpan = 1u << 23;  // the floats of [1, 2)

__device__ float approximate_reciprocal(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

__global__ void reciprocals(uint32_t count, float* out) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = approximate_reciprocal(__uint_as_float(0x3f800000u | i));
}

__global__ void reciprocals_of_integers(uint32_t count, float* out) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = approximate_reciprocal(static_cast<float>(i + 1));
}

int32_t bits(float x) {
  int32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

std::vector<float> run(void (*kernel)(uint32_t, float*), uint32_t count) {
  float* device = nullptr;
  FPLAB_CUDA(cudaMalloc(&device, count * sizeof(float)));
  kernel<<<(count + 255) / 256, 256>>>(count, device);
  FPLAB_CUDA_LAUNCHED("reciprocals");
  std::vector<float> host(count);
  FPLAB_CUDA(cudaMemcpy(host.data(), device, count * sizeof(float), cudaMemcpyDeviceToHost));
  FPLAB_CUDA(cudaFree(device));
  return host;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The GPU's rcp.approx.ftz.f32 on every float of [1, 2) against the correctly rounded 1/x.",
               "gpu_reciprocal_table"};
  uint32_t integers = 128;
  std::string out;
  app.add_option("--integers", integers, "print the counts 1 .. N whose reciprocal is not correctly rounded (128)")
      ->check(CLI::Range(1u, 1u << 24));
  app.add_option("--out", out, "write the 2^23 differences (int8, ulps) to FILE");
  app.footer("example:\n  gpu_reciprocal_table --integers 128 --out /tmp/rcp_delta.bin");
  if (const int status = fplab::tools::gpu::parse_options(app, argc, argv); status >= 0) return status;
  if (!fplab::tools::gpu::device_or_skip()) return 0;
  const std::vector<float> device = run(reciprocals, kSpan);
  std::vector<int8_t> delta(kSpan);
  long histogram[5] = {};  // -2 .. +2 ulps
  for (uint32_t i = 0; i < kSpan; ++i) {
    float x;
    const uint32_t b = 0x3f800000u | i;
    std::memcpy(&x, &b, sizeof x);
    const int32_t d = bits(device[i]) - bits(1.0f / x);  // the host's division: correctly rounded
    if (d < -2 || d > 2) {
      std::fprintf(stderr, "gpu_reciprocal_table: %.9g is %d ulps off: outside the table's -2 .. 2\n", x, d);
      return 1;
    }
    delta[i] = static_cast<int8_t>(d);
    ++histogram[d + 2];
  }
  std::printf("rcp.approx.ftz.f32 on [1, 2) minus the correctly rounded 1/x, ulps -2 .. +2:");
  for (const long h : histogram) std::printf(" %ld", h);
  std::printf(" (of %u)\n", kSpan);
  const std::vector<float> at_integers = run(reciprocals_of_integers, integers);
  std::printf("counts 1 .. %u whose reciprocal differs (count:ulps):", integers);
  for (uint32_t k = 1; k <= integers; ++k)
    if (const int32_t d = bits(at_integers[k - 1]) - bits(1.0f / static_cast<float>(k)); d != 0)
      std::printf(" %u:%+d", k, d);
  std::printf("\n");
  if (!out.empty()) {
    const std::string temporary = out + ".tmp";
    std::ofstream file(temporary, std::ios::binary);
    file.write(reinterpret_cast<const char*>(delta.data()), static_cast<std::streamsize>(delta.size()));
    file.close();
    if (!file || std::rename(temporary.c_str(), out.c_str()) != 0) {
      std::fprintf(stderr, "gpu_reciprocal_table: cannot write %s\n", out.c_str());
      return 2;
    }
  }
  return 0;
}
