// The tensor-core GEMM's check before first use on a device (gpu_tensor_core_gemm.hpp,
// tensor_core_gemm_why_not): every model the kernel takes, as one chain and as split-K, on a shape
// with ragged edges, over ordinary data and data where the chip and the model part (sums past
// 2^128, products below fp32's subnormals, zeros and zero rows, infinities and NaNs), against
// sim::gemm on the CPU, bit for bit. A GPU whose tensor cores add otherwise than the H100's
// measured model (another Hopper part, a driver that changes what mma.sync compiles to), or a
// kernel error, then sends the GEMMs back to the CPU engine with the reason, instead of giving
// other bits. NaNs count as equal whatever their bits. About half a second once per device and
// process.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/gpu_tensor_core_gemm.hpp"

namespace fplab::sim::gpu {
namespace {

// The same bits, or both NaN: a NaN's bits are the adder's (the split-K fold's __fadd_rn gives
// 0x7fffffff, the CPU's addition 0x7fc00000 or 0xffc00000 by operand order), as gpu_stats compares.
bool same_result(float cpu, float gpu) {
  return std::bit_cast<uint32_t>(cpu) == std::bit_cast<uint32_t>(gpu) || (std::isnan(cpu) && std::isnan(gpu));
}

// "" or the first probe whose outputs differ from sim::gemm's.
std::string run_probes() {
  const GemmShape shape{80, 72, 100};  // two blocks each way, the second with an edge
  struct Data {
    const char* what;
    int lo, hi;
    double zeros, specials;
  };
  const Data sets[] = {{"ordinary data", -3, 3, 0, 0},
                       {"sums past 2^128", 58, 64, 0, 0},
                       {"tiny products", -80, -74, 0.1, 0},
                       {"zeros, wide range", -70, 60, 0.3, 0},
                       {"infinities and NaNs", -3, 3, 0.05, 0.02}};
  for (const char* model : {"tc-h100-tf32", "tc-h100-tf32-rne", "tc-h100-tf32-rna", "tc-h100-bf16", "tc-h100-fp16"})
    for (const std::string& text :
         {std::string("all:fused(") + model + ")", std::string("split(3):fused(") + model + ") | all:seq"}) {
      const Schedule schedule = parse_schedule(text);
      uint64_t seed = 1;
      for (const Data& d : sets) {
        std::vector<float> a = tensor_core_probe_values(shape.m * shape.k, seed++, d.lo, d.hi, d.zeros, d.specials);
        const std::vector<float> b = tensor_core_probe_values(shape.k * shape.n, seed++, d.lo, d.hi, d.zeros, d.specials);
        if (d.zeros > 0)
          for (size_t t = 0; t < shape.k; ++t) a[t] = t % 2 ? 0.0f : -0.0f;  // a zero row
        std::vector<float> cpu(shape.m * shape.n);
        sim::gemm(schedule, a.data(), b.data(), cpu.data(), shape, Arithmetic{});
        std::vector<float> gpu;
        try {
          gpu = tensor_core_gemm(schedule, a.data(), b.data(), shape);
        } catch (const std::exception& e) {
          return "this GPU's tensor-core GEMM failed on its check (" + text + "): " + e.what();
        }
        size_t differ = 0;
        for (size_t i = 0; i < cpu.size(); ++i) differ += !same_result(cpu[i], gpu[i]);
        if (differ)
          return "this GPU's tensor-core GEMM differs from the model on its check (" + text + ", " + d.what + ": " +
                 std::to_string(differ) + " of " + std::to_string(cpu.size()) + " outputs)";
      }
    }
  return {};
}

}  // namespace

std::vector<float> tensor_core_probe_values(size_t count, uint64_t seed, int lo, int hi, double zeros,
                                            double specials) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> exponent(lo, hi);
  std::uniform_real_distribution<double> share;
  std::vector<float> v(count);
  for (float& x : v) {
    const double u = share(rng);
    if (u < zeros)
      x = share(rng) < 0.5 ? 0.0f : -0.0f;
    else if (u < zeros + specials)
      x = share(rng) < 0.5 ? std::numeric_limits<float>::quiet_NaN() : (share(rng) < 0.5 ? INFINITY : -INFINITY);
    else
      x = std::ldexp(normal(rng), exponent(rng));
  }
  return v;
}

std::string tensor_core_gemm_why_not() {
  std::string why = tensor_core_gemm_device_why_not();
  if (!why.empty()) return why;
  static CheckPerDevice check(run_probes);
  return check();
}

}  // namespace fplab::sim::gpu
