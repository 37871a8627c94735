// gpu_bench: the cost of a fixed reduction order on the GPU. Sums 1 GiB of fp32 with the
// deterministic schedule (the last block folds the block partials in block order) and with its
// atomicAdd twin, next to a device-to-device copy of the same bytes measured in the same run, and
// CUB's DeviceReduce::Sum for the record; then split-K GEMM with ordered vs atomic combination.
// Each time is the median of --reps event-timed runs after warm-ups. Prints the table last.
//
//   gpu_bench [--json FILE] [--reps N] [--gib G]      (--help)
#include <cub/cub.cuh>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/gpu_gemm.hpp"
#include "sim/cuda/gpu_gemm_probe.hpp"
#include "sim/cuda/gpu_reduce.hpp"
#include "sim/cuda/gpu_stats.hpp"
#include "sim/cuda/gpu_timing.cuh"
#include "sim/engine.hpp"
#include "tools/gpu/tool_cli.hpp"
#include "tools/gpu/tool_device.hpp"
#include "tools/gpu/tool_rng.hpp"

using namespace fplab;
using namespace fplab::sim;
using namespace fplab::sim::gpu;
using nlohmann::json;

namespace {

__global__ void fill_uniform(float* x, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b1u ^ static_cast<uint32_t>(i >> 32) ^ seed;
    h ^= h >> 16, h *= 0x85ebca6bu, h ^= h >> 13, h *= 0xc2b2ae35u, h ^= h >> 16;
    x[i] = static_cast<float>(h >> 8) * 0x1p-23f - 1.0f;  // uniform in [-1, 1), never all zeros
  }
}

__global__ void copy_vec4(const float4* __restrict__ in, float4* __restrict__ out, size_t n4) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = in[i];
}

using fplab::sim::gpu::detail::median_ms;

std::string reduction(int64_t threads, int64_t blocks, int vector, const char* grid) {
  return "strided(" + std::to_string(vector * threads * blocks) + "):seq | " +
         (vector > 1 ? "contig(" + std::to_string(vector) + "):seq | " : std::string()) +
         "contig(32):shfl_down | contig(" + std::to_string(threads / 32) + "):seq | all:" + grid;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path = "gpu_bench.json";
  int reps = 30;
  double gib = 1.0;
  CLI::App app(
      "The cost of a fixed reduction order on the GPU: a sum of --gib GiB of fp32 in fixed\n"
      "order vs atomicAdd vs a device copy (and CUB), then split-K GEMM ordered vs atomic. Needs\n"
      "a GPU (prints SKIPPED without one); the table comes last.",
      "gpu_bench");
  app.add_option("--json", json_path, "where to write the JSON results")->capture_default_str();
  app.add_option("--reps", reps, "event-timed runs per median")->check(CLI::Range(3, 1 << 20))->capture_default_str();
  app.add_option("--gib", gib, "GiB of fp32 to sum")->check(CLI::Range(1e-6, 64.0))->capture_default_str();
  app.footer(
      "Examples:\n  gpu_bench\n  gpu_bench --json out/gpu_bench.json --reps 30\n  gpu_bench --gib 0.25 --reps 5\n");
  if (const int status = tools::gpu::parse_options(app, argc, argv); status >= 0) return status;
  const std::string date = tools::gpu::utc_now();
  const auto device = tools::gpu::device_or_skip(&date);
  if (!device) return 0;
  const DeviceInfo& info = *device;

  const size_t n = static_cast<size_t>(gib * (1 << 28)) / 64 * 64;  // floats; 2^28 = 1 GiB
  const double bytes = static_cast<double>(n) * sizeof(float);
  float *x = nullptr, *copy = nullptr;
  FPLAB_CUDA(cudaMalloc(&x, n * sizeof(float)));
  FPLAB_CUDA(cudaMalloc(&copy, n * sizeof(float)));
  fill_uniform<<<4 * info.sm_count, 256>>>(x, n, 2026);
  FPLAB_CUDA_LAUNCHED("fill_uniform");

  struct Result {
    std::string what, schedule;
    double ms, gbps;  // GB/s = 1e9 bytes/s, bytes read (+ written for copies)
  };
  std::vector<Result> results;
  auto record = [&](const std::string& what, const std::string& schedule, double ms, double moved) {
    results.push_back({what, schedule, ms, moved / (ms * 1e-3) / 1e9});
    std::fprintf(stderr, "%-44s %9.3f ms %8.1f GB/s\n", what.c_str(), ms, results.back().gbps);
  };

  record("cudaMemcpy device to device (read+write)", "",
         median_ms([&] { FPLAB_CUDA(cudaMemcpyAsync(copy, x, n * sizeof(float), cudaMemcpyDeviceToDevice)); }, reps),
         2 * bytes);
  record("copy kernel, 16-byte accesses (read+write)", "",
         median_ms(
             [&] {
               copy_vec4<<<8 * info.sm_count, 256>>>(reinterpret_cast<const float4*>(x),
                                                     reinterpret_cast<float4*>(copy), n / 4);
             },
             reps),
         2 * bytes);
  const double copy_gbps = std::max(results[0].gbps, results[1].gbps);

  GpuReduction gpu(x, n);
  struct Pair {
    int64_t threads, blocks;
    int vector;
  };
  const int64_t sms = info.sm_count;
  const std::vector<Pair> pairs = {{256, 8 * sms, 4},  {256, 4 * sms, 4}, {512, 4 * sms, 4},
                                   {256, 16 * sms, 4}, {256, 8 * sms, 8}, {256, 1024, 1}};
  json ratios = json::array();
  double headline_det = 0, headline_atomic = 0;
  for (const auto& p : pairs) {
    const std::string det = reduction(p.threads, p.blocks, p.vector, "seq");
    const std::string atomic = reduction(p.threads, p.blocks, p.vector, "atomic");
    const ReductionPlan det_plan = plan_reduction(parse_schedule(det));
    const ReductionPlan atomic_plan = plan_reduction(parse_schedule(atomic));
    // Alternate the two, twice, and keep each one's best median: drift hits both alike.
    double det_ms = 1e30, atomic_ms = 1e30;
    for (int round = 0; round < 2; ++round) {
      det_ms = std::min(det_ms, median_ms([&] { gpu.launch(det_plan); }, reps));
      atomic_ms = std::min(atomic_ms, median_ms([&] { gpu.launch(atomic_plan); }, reps));
    }
    const std::string label =
        std::to_string(p.threads) + "x" + std::to_string(p.blocks) + " V=" + std::to_string(p.vector);
    record("fixed order  " + label, det, det_ms, bytes);
    const double det_gbps = results.back().gbps;
    record("atomicAdd    " + label, atomic, atomic_ms, bytes);
    const double atomic_gbps = results.back().gbps;
    ratios.push_back({{"shape", label},
                      {"deterministic", det},
                      {"atomic", atomic},
                      {"deterministic_over_atomic", det_gbps / atomic_gbps},
                      {"deterministic_over_copy", det_gbps / copy_gbps}});
    if (headline_det == 0) headline_det = det_gbps, headline_atomic = atomic_gbps;
  }

  // CUB for the record (its own order; not one of our schedules).
  void* temp = nullptr;
  size_t temp_bytes = 0;
  float* cub_out = nullptr;
  FPLAB_CUDA(cudaMalloc(&cub_out, sizeof(float)));
  FPLAB_CUDA(cub::DeviceReduce::Sum(temp, temp_bytes, x, cub_out, static_cast<int64_t>(n)));
  FPLAB_CUDA(cudaMalloc(&temp, temp_bytes));
  record("cub::DeviceReduce::Sum", "",
         median_ms([&] { FPLAB_CUDA(cub::DeviceReduce::Sum(temp, temp_bytes, x, cub_out, static_cast<int64_t>(n))); },
                   reps),
         bytes);

  // The headline schedule on 1 GiB, bit for bit against the CPU emulation.
  const std::string headline = reduction(256, 8 * sms, 4, "seq");
  const float gpu_sum = gpu.run(plan_reduction(parse_schedule(headline)));
  std::vector<float> host(n);
  FPLAB_CUDA(cudaMemcpy(host.data(), x, n * sizeof(float), cudaMemcpyDeviceToHost));
  std::vector<double> values(host.begin(), host.end());
  host = {};
  const auto cpu_sum = static_cast<float>(sim::reduce(parse_schedule(headline), values, Arithmetic{}));
  values = {};
  const bool headline_identical = stats::same_bits(gpu_sum, cpu_sum);

  // Split-K GEMM: ordered vs atomic combination of the parts (the cost of determinism).
  const size_t gm = 2048, gn = 2048, gk = 8192;
  tools::gpu::ToolRng rng(5);
  std::vector<float> a(gm * gk), b(gk * gn);
  for (auto& v : a) v = rng.signed_unit();
  for (auto& v : b) v = rng.signed_unit();
  GpuGemm gemm(a.data(), b.data(), {gm, gn, gk});
  json gemm_rows = json::array();
  std::vector<std::pair<std::string, double>> gemm_times;
  for (const std::string s : {"seq", "splitk(4)", "splitk-tree(4)", "splitk-atomic(4)", "splitk(16)", "splitk-tree(16)",
                              "splitk-atomic(16)"}) {
    const double ms = GpuGemmProbe::time_ms(gemm, plan_gemm(parse_schedule(s)), std::max(5, reps / 3));
    const double tflops = 2.0 * gm * gn * gk / (ms * 1e-3) / 1e12;
    gemm_times.push_back({s, ms});
    gemm_rows.push_back({{"schedule", s}, {"ms", ms}, {"tflops", tflops}});
  }

  FPLAB_CUDA(cudaFree(x));
  FPLAB_CUDA(cudaFree(copy));
  FPLAB_CUDA(cudaFree(temp));
  FPLAB_CUDA(cudaFree(cub_out));

  json rows = json::array();
  for (const auto& r : results)
    rows.push_back({{"what", r.what}, {"schedule", r.schedule}, {"ms", r.ms}, {"gb_per_s", r.gbps}});
  const double det_vs_atomic = headline_det / headline_atomic, det_vs_copy = headline_det / copy_gbps;
  const json doc = {{"device", info.describe()},
                    {"date", date},
                    {"bytes", bytes},
                    {"reps", reps},
                    {"rows", rows},
                    {"pairs", ratios},
                    {"gemm", {{"m", gm}, {"n", gn}, {"k", gk}, {"rows", gemm_rows}}},
                    {"headline",
                     {{"schedule", headline},
                      {"deterministic_over_atomic", det_vs_atomic},
                      {"deterministic_over_copy", det_vs_copy},
                      {"gpu_sum", gpu_sum},
                      {"cpu_sum", cpu_sum},
                      {"bit_identical", headline_identical}}}};
  std::ofstream(json_path) << doc.dump(1) << '\n';

  std::printf("\n%.2f GiB fp32, median of %d runs each (GB/s = 10^9 bytes/s; copies count bytes read + written)\n",
              bytes / (1 << 30), reps);
  std::printf("%-46s %10s %10s\n", "what", "ms", "GB/s");
  for (const auto& r : results) std::printf("%-46s %10.3f %10.1f\n", r.what.c_str(), r.ms, r.gbps);
  std::printf("\nsplit-K GEMM %zux%zux%zu on CUDA cores:\n", gm, gn, gk);
  for (const auto& [s, ms] : gemm_times)
    std::printf("  %-20s %9.3f ms %7.2f TFLOP/s\n", s.c_str(), ms, 2.0 * gm * gn * gk / (ms * 1e-3) / 1e12);
  std::printf("\nheadline %s\n", headline.c_str());
  std::printf("  deterministic / atomic throughput: %.3f (target >= 0.97) %s\n", det_vs_atomic,
              det_vs_atomic >= 0.97 ? "ok" : "MISSED");
  std::printf("  deterministic / copy bandwidth:    %.3f (target >= 0.85) %s\n", det_vs_copy,
              det_vs_copy >= 0.85 ? "ok" : "MISSED");
  std::printf("  1 GiB sum == CPU emulation bit for bit: %s (gpu %a, cpu %a)\n", headline_identical ? "yes" : "NO",
              gpu_sum, cpu_sum);
  return headline_identical ? 0 : 1;
}
