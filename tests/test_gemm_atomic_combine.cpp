// What a GEMM's atomic combine of split-K parts is in the emulation, pinned on the CPU: sim::gemm
// with `split(S):seq | all:atomic` (or contig) under a noise key equals each part's own FMA chain
// (sim::gemm of that slice of K with `all:seq`) folded in fp32, left to right, in the Fisher-Yates
// permutation of the parts drawn from gemm_output_key(key, i, j, n).stream(1, 0), one permutation
// per tile of 4 x 64 outputs. The GPU's seeded split-K GEMM (sim/cuda/gpu_seeded, fold_gemm_parts)
// is built on exactly this, and runs only where a GPU is; this test runs everywhere.
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "sim/engine.hpp"
#include "sim/generate.hpp"
#include "sim/schedule.hpp"
#include "sim/schedule_walk.hpp"

using namespace fplab;
using namespace fplab::sim;

namespace {

std::vector<float> floats(const std::string& spec, uint64_t seed) {
  const auto v = generate(spec, seed);
  return {v.begin(), v.end()};
}

// Output (i, j) as the GPU builds it: parts, then the tile's permutation.
std::vector<float> parts_then_permutation(const std::vector<float>& a, const std::vector<float>& b, GemmShape shape,
                                          size_t chunk, const NoiseKey& key) {
  const size_t count = (shape.k + chunk - 1) / chunk;
  std::vector<std::vector<float>> parts(count, std::vector<float>(shape.m * shape.n));
  for (size_t p = 0; p < count; ++p) {
    const size_t first = p * chunk, len = std::min(chunk, shape.k - first);
    std::vector<float> a_slice(shape.m * len), b_slice(b.begin() + first * shape.n, b.begin() + (first + len) * shape.n);
    for (size_t i = 0; i < shape.m; ++i)
      for (size_t t = 0; t < len; ++t) a_slice[i * len + t] = a[i * shape.k + first + t];
    gemm(parse_schedule("all:seq"), a_slice.data(), b_slice.data(), parts[p].data(), {shape.m, shape.n, len},
         Arithmetic{});
  }
  std::vector<float> c(shape.m * shape.n);
  for (size_t i = 0; i < shape.m; ++i)
    for (size_t j = 0; j < shape.n; ++j) {
      std::vector<size_t> order(count);
      std::iota(order.begin(), order.end(), 0);
      detail::permute(order, gemm_output_key(key, i, j, shape.n).stream(1, 0));
      float acc = parts[order[0]][i * shape.n + j];
      for (size_t q = 1; q < count; ++q) acc += parts[order[q]][i * shape.n + j];
      c[i * shape.n + j] = acc;
    }
  return c;
}

}  // namespace

TEST_CASE("gemm, atomic combine: the parts' own chains folded in the tile's permutation of stream (1, 0)") {
  struct Case {
    const char* schedule;
    size_t chunk_of_k;  // 0: split(S) below, its chunk ceil(k / S)
    size_t s;
  };
  const Case cases[] = {{"split(80):seq | all:atomic", 0, 80},
                        {"split(7):seq | all:atomic", 0, 7},
                        {"contig(33):seq | all:atomic", 33, 0}};
  const GemmShape shapes[] = {{1, 1, 1}, {5, 65, 333}, {9, 130, 300}, {3, 5, 50}, {130, 9, 700}};
  const NoiseKey keys[] = {{3, 17, 5}, {4, 17, 5}, {3, 18, 6}};
  for (const Case& c : cases)
    for (const GemmShape& shape : shapes)
      for (const NoiseKey& key : keys) {
        const auto a = floats("lognormal:" + std::to_string(shape.m * shape.k), shape.m * 3 + shape.k);
        const auto b = floats("normal:" + std::to_string(shape.k * shape.n), shape.n * 5 + shape.k);
        std::vector<float> want(shape.m * shape.n);
        gemm(parse_schedule(c.schedule), a.data(), b.data(), want.data(), shape, Arithmetic{}, key);
        const size_t chunk = c.chunk_of_k ? c.chunk_of_k : (shape.k + c.s - 1) / c.s;
        const auto got = parts_then_permutation(a, b, shape, chunk, key);
        size_t same = 0;
        for (size_t o = 0; o < want.size(); ++o) same += std::bit_cast<uint32_t>(want[o]) == std::bit_cast<uint32_t>(got[o]);
        INFO(c.schedule << ", " << shape.m << " x " << shape.n << " x " << shape.k << ", impl seed " << key.impl_seed);
        CHECK(same == want.size());
      }
}
