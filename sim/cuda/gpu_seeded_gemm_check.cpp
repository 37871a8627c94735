// The seeded split-K GEMM's check before first use on a device (gpu_gemm.hpp,
// seeded_gemm_why_not): split-K and contiguous parts with an atomic combine, on shapes with ragged
// edges in every direction (output tiles of 4 x 64 cut by the matrix's end, a last part shorter
// than the others, one part only, 9000 parts whose permutations are made in global memory),
// several impl seeds, op ids and calls, against sim::gemm on the CPU, bit for bit. (The slabs a
// GEMM whose parts pass 256 MiB runs in are left to test_gpu_kernels: too large for a probe.) The fold draws its orders on the device from the same counter-based stream as
// the CPU; should a device, a compiler or a driver make it draw otherwise, those GEMMs go back to
// the CPU engine with the reason instead of giving other bits. A few milliseconds once per device
// and process.
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/gpu_gemm.hpp"

namespace fplab::sim::gpu {
namespace {

// Values of wide magnitudes and both signs: the order of a sum shows in its bits.
std::vector<float> probe_values(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::vector<float> v(count);
  for (float& x : v) x = std::ldexp(normal(rng), exponent(rng));
  return v;
}

std::string run_probes() {
  struct Probe {
    const char* schedule;
    GemmShape shape;
    NoiseKey key;
  };
  const Probe probes[] = {
      {"split(7):seq | all:atomic", {9, 130, 300}, {1, 2, 3}},     // ragged tiles both ways, a short last part
      {"split(7):seq | all:atomic", {9, 130, 300}, {2, 2, 3}},     // another seed
      {"split(48):seq | all:atomic", {70, 64, 1000}, {5, 9, 0}},   // rtx5000's combine
      {"contig(64):seq | all:atomic", {5, 200, 700}, {3, 1, 7}},   // parts of 64 terms
      {"split(80):seq | all:atomic", {3, 5, 50}, {4, 4, 4}},       // fewer terms than parts
      {"split(3):seq | all:atomic", {6, 70, 1}, {1, 1, 1}},        // one part only
      {"contig(1):seq | all:atomic", {4, 64, 9000}, {6, 2, 1}},    // permutations past shared memory
      {"each(50)[contig(16):seq] | all:atomic", {5, 68, 420}, {7, 3, 2}},  // parts that restart every 50 terms
  };
  for (const Probe& p : probes) {
    const Schedule schedule = parse_schedule(p.schedule);
    const std::vector<float> a = probe_values(p.shape.m * p.shape.k, p.key.impl_seed * 31 + 1);
    const std::vector<float> b = probe_values(p.shape.k * p.shape.n, p.key.impl_seed * 31 + 2);
    std::vector<float> cpu(p.shape.m * p.shape.n), gpu(cpu.size());
    sim::gemm(schedule, a.data(), b.data(), cpu.data(), p.shape, Arithmetic{}, p.key);
    try {
      gemm_seeded(schedule, a.data(), b.data(), gpu.data(), p.shape, p.key);
    } catch (const std::exception& e) {
      return std::string("this GPU's seeded split-K GEMM failed on its check (") + p.schedule + "): " + e.what();
    }
    size_t differ = 0;
    for (size_t i = 0; i < cpu.size(); ++i) differ += std::bit_cast<uint32_t>(cpu[i]) != std::bit_cast<uint32_t>(gpu[i]);
    if (differ)
      return std::string("this GPU's seeded split-K GEMM differs from the emulation on its check (") + p.schedule +
             ", " + std::to_string(p.shape.m) + " x " + std::to_string(p.shape.n) + " x " + std::to_string(p.shape.k) +
             ": " + std::to_string(differ) + " of " + std::to_string(cpu.size()) + " outputs)";
  }
  return {};
}

}  // namespace

std::string seeded_gemm_why_not() {
  std::string why;
  if (!device_available(&why)) return why;
  static CheckPerDevice check(run_probes);
  return check();
}

}  // namespace fplab::sim::gpu
