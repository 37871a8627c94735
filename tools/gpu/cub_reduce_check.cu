// cub_reduce_check: CUB's DeviceReduce::Sum on this GPU against fplab's cub-reduce preset
// (sim/cub_reduce.hpp, docs/reveal.md "CUB's DeviceReduce::Sum"). Two checks:
//  - reveal: CUB's sum probed as a black box (reveal/probe_sum.hpp) at --reveal sizes; its tree
//    must be one the preset names (match_schedule) and the preset's replay must give CUB's bits on
//    every --trials input;
//  - value: seeded arrays of --sizes terms (normal × 2^k, k uniform in -8 .. 8; sizes past the
//    probes' 65536 and past the first pass's grid cap), CUB's sum against the preset's, bit for bit.
// Exit status 0 when every check holds (or no device: SKIPPED), 1 when one does not, 2 on bad options.
//
//   cub_reduce_check [--reveal N,... | --no-reveal] [--sizes N,...] [--grid G] [--trials T] [--seed S] [--json FILE]
#include <cub/cub.cuh>

#include <bit>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reveal/match_schedule.hpp"
#include "reveal/probe_sum.hpp"
#include "reveal/replay_schedule.hpp"
#include "sim/cuda/cuda_check.cuh"
#include "sim/engine.hpp"
#include "sim/schedule.hpp"
#include "tools/gpu/tool_cli.hpp"
#include "tools/gpu/tool_device.hpp"
#include "tools/gpu/tool_rng.hpp"

using namespace fplab;
using nlohmann::json;

namespace {

// cub::DeviceReduce::Sum of host values: copied up, summed, the result copied down. Buffers grow.
class CubSum {
 public:
  ~CubSum() {
    cudaFree(in_);
    cudaFree(out_);
    cudaFree(temp_);
  }
  float operator()(std::span<const float> x) {
    if (x.size() > in_count_) {
      cudaFree(in_);
      FPLAB_CUDA(cudaMalloc(&in_, x.size() * sizeof(float)));
      in_count_ = x.size();
    }
    if (!out_) FPLAB_CUDA(cudaMalloc(&out_, sizeof(float)));
    size_t bytes = 0;
    FPLAB_CUDA(cub::DeviceReduce::Sum(nullptr, bytes, in_, out_, static_cast<int>(x.size())));
    if (bytes > temp_bytes_) {
      cudaFree(temp_);
      FPLAB_CUDA(cudaMalloc(&temp_, bytes));
      temp_bytes_ = bytes;
    }
    FPLAB_CUDA(cudaMemcpy(in_, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
    FPLAB_CUDA(cub::DeviceReduce::Sum(temp_, bytes, in_, out_, static_cast<int>(x.size())));
    float result = 0;
    FPLAB_CUDA(cudaMemcpy(&result, out_, sizeof(float), cudaMemcpyDeviceToHost));
    return result;
  }

 private:
  float *in_ = nullptr, *out_ = nullptr;
  void* temp_ = nullptr;
  size_t in_count_ = 0, temp_bytes_ = 0;
};

std::vector<float> seeded_terms(size_t n, uint64_t seed) {
  tools::gpu::ToolRng rng({seed, n});
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>(rng.normal() * std::ldexp(1.0, static_cast<int>(rng.below(17)) - 8));
  return x;
}

bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> reveal_sizes{100, 1000, 4097, 16384}, sizes{6000000, 25000000, 30000001};
  int grid = 5280;
  size_t trials = 20;
  uint64_t seed = 1;
  std::string json_file;
  CLI::App app{"CUB's DeviceReduce::Sum on this GPU against fplab's cub-reduce preset: revealed trees and values",
               "cub_reduce_check"};
  bool no_reveal = false;
  app.add_option("--reveal", reveal_sizes, "sizes to probe CUB's order at (2 to 65536)")
      ->delimiter(',')
      ->check(CLI::Range(size_t{2}, size_t{65536}));
  app.add_option("--sizes", sizes, "sizes of the seeded arrays whose sums are compared")
      ->delimiter(',')
      ->check(CLI::Range(size_t{1}, size_t{2147483647}));
  app.add_option("--grid", grid, "G of cub-reduce(G), the first pass's most blocks (5280: an H100/H200)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_flag("--no-reveal", no_reveal, "no probes: the value checks only");
  app.add_option("--trials", trials, "random inputs each revealed tree is replayed on")
      ->check(CLI::Range(size_t{1}, size_t{100000}))
      ->capture_default_str();
  app.add_option("--seed", seed, "seed of the arrays and the trials")->capture_default_str();
  app.add_option("--json", json_file, "also write the results to this file");
  app.footer(
      "Examples:\n"
      "  cub_reduce_check\n"
      "  cub_reduce_check --reveal 32,5000 --sizes 1000000 --json cub.json\n"
      "  cub_reduce_check --grid 3960 --no-reveal --sizes 30000001    # another first-pass grid cap");
  if (const int status = tools::gpu::parse_options(app, argc, argv); status >= 0) return status;
  if (no_reveal) reveal_sizes.clear();

  const std::string date = tools::gpu::utc_now();
  const auto device = tools::gpu::device_or_skip(&date);
  if (!device) return 0;
  const std::string preset = "cub-reduce(" + std::to_string(grid) + ")";
  const sim::Schedule schedule = sim::parse_schedule(preset);
  CubSum cub;
  const reveal::SumFunction cub_function = [&](std::span<const float> x) { return cub(x); };
  json doc = {{"date", date}, {"device", device->describe()}, {"preset", preset}, {"reveal", json::array()},
              {"values", json::array()}};
  bool all_hold = true;

  std::printf("\n%-8s %-9s %-9s %-10s %s\n", "reveal n", "calls", "seconds", "named", "replayed");
  for (size_t n : reveal_sizes) {
    const reveal::RevealedSum revealed = reveal::reveal_sum(cub_function, n);
    const auto match = reveal::match_schedule(revealed.tree);
    bool named = false;
    for (const auto& s : match.schedules) named = named || s == preset || sim::parse_schedule(s) == schedule;
    const auto replay = reveal::replay_schedules_sum(cub_function, {preset}, n, trials, seed);
    const bool holds = named && replay[0].identical == trials;
    all_hold = all_hold && holds;
    std::printf("%-8zu %-9zu %-9.2f %-10s %zu/%zu%s\n", n, revealed.calls, revealed.seconds, named ? "yes" : "NO",
                replay[0].identical, trials, holds ? "" : "   <- differs");
    doc["reveal"].push_back({{"n", n},
                             {"calls", revealed.calls},
                             {"seconds", revealed.seconds},
                             {"schedules", match.schedules},
                             {"named", named},
                             {"replayed", replay[0].identical},
                             {"trials", trials}});
  }

  std::printf("\n%-10s %-16s %-16s %s\n", "value n", "CUB", preset.c_str(), "bits");
  for (size_t n : sizes) {
    const std::vector<float> x = seeded_terms(n, seed);
    const float real = cub(x);
    const std::vector<double> terms(x.begin(), x.end());
    double emulated = 0;
    sim::reduce_batch(schedule, terms.data(), n, 1, sim::Arithmetic{}, {}, &emulated);
    const bool same = same_bits(real, static_cast<float>(emulated));
    all_hold = all_hold && same;
    std::printf("%-10zu %-16a %-16a %s\n", n, real, static_cast<float>(emulated), same ? "same" : "DIFFERENT");
    doc["values"].push_back({{"n", n}, {"cub", real}, {"fplab", emulated}, {"same", same}});
  }
  doc["all_hold"] = all_hold;
  if (!json_file.empty()) std::ofstream(json_file) << doc.dump(2) << "\n";
  std::printf("\n%s\n", all_hold ? "every check holds" : "SOME CHECK FAILED");
  return all_hold ? 0 : 1;
}
