#include "sim/cub_reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>

namespace fplab::sim {
namespace {

constexpr int kWarp = 32;

class CubBlocks {
 public:
  CubBlocks(const Reducer::CubShape& shape, AdditionSteps& steps) : shape_(shape), steps_(steps) {}

  // One block's sum of the tiles of items[0, end) (slots) at begin, begin + stride, ...:
  // AgentReduce's ConsumeRange, then BlockReduce. Only the last tile can be partial.
  int32_t block(const std::vector<int32_t>& items, int64_t begin, int64_t end, int64_t stride) {
    const int threads = shape_.threads;
    const int64_t tile = int64_t{threads} * shape_.items;
    std::vector<std::optional<int32_t>> sums(static_cast<size_t>(threads));
    bool first_tile = true;
    int64_t at = begin, valid_threads = threads;
    for (; at + tile <= end; at += stride, first_tile = false)
      for (int t = 0; t < threads; ++t) thread_reduce(sums[static_cast<size_t>(t)], items, at, t);
    if (at < end) {
      const int64_t valid = end - at;
      if (first_tile) valid_threads = std::min<int64_t>(valid, threads);
      for (int t = 0; t < threads; ++t)
        for (int64_t i = t; i < valid; i += threads) add(sums[static_cast<size_t>(t)], items[static_cast<size_t>(at + i)]);
    }
    std::optional<int32_t> block_sum;
    for (int64_t warp = 0; warp * kWarp < valid_threads; ++warp) {
      const int64_t lanes = std::min<int64_t>(kWarp, valid_threads - warp * kWarp);
      std::vector<std::optional<int32_t>> lane(sums.begin() + warp * kWarp, sums.begin() + warp * kWarp + lanes);
      add(block_sum, pairwise(lane));
    }
    return *block_sum;
  }

 private:
  // Thread t's items of the full tile at `at` (vectors of V at (v·T + t)·V), into its running sum
  // as ThreadReduce does with a prefix: the running sum (if any) first, then the items in register
  // order, reduced by pairing (below) — so a later tile's items are not summed apart and then added,
  // but meet the running sum in the tree: [sum, r0 … r15] is tree(sum, r0 … r14) + r15.
  void thread_reduce(std::optional<int32_t>& sum, const std::vector<int32_t>& items, int64_t at, int t) {
    std::vector<std::optional<int32_t>> registers;
    registers.reserve(static_cast<size_t>(shape_.items) + 1);
    if (sum) registers.push_back(sum);
    const int vector = shape_.vector;
    for (int v = 0; v < shape_.items / vector; ++v)
      for (int j = 0; j < vector; ++j)
        registers.push_back(items[static_cast<size_t>(at + (int64_t{v} * shape_.threads + t) * vector + j)]);
    sum = pairwise(registers);
  }

  // CUB's binary-tree reductions (a thread's items, a warp's lanes): element j takes element j + o
  // for o = 1, 2, 4, … and j a multiple of 2o; the result is element 0.
  std::optional<int32_t> pairwise(std::vector<std::optional<int32_t>>& v) {
    for (size_t o = 1; o < v.size(); o *= 2)
      for (size_t j = 0; j + o < v.size(); j += 2 * o) add(v[j], v[j + o]);
    return v[0];
  }

  void add(std::optional<int32_t>& into, const std::optional<int32_t>& from) { add_slot(steps_, into, from); }

  Reducer::CubShape shape_;
  AdditionSteps& steps_;
};

}  // namespace

AdditionSteps cub_reduce_steps(size_t n, const Reducer::CubShape& shape) {
  if (n == 0) throw std::invalid_argument("cub_reduce_steps: at least one term");
  if (n > static_cast<size_t>(INT32_MAX)) throw std::invalid_argument("cub_reduce_steps: more than 2^31 - 1 terms");
  if (shape.threads < 1 || shape.threads % kWarp || shape.vector < 1 || shape.items < shape.vector ||
      shape.items % shape.vector || shape.grid < 1)
    throw std::invalid_argument("cub_reduce_steps: T a multiple of 32, I a multiple of V, G >= 1");
  AdditionSteps steps;
  steps.adds.reserve(n);
  CubBlocks blocks(shape, steps);
  std::vector<int32_t> terms(n);
  for (size_t i = 0; i < n; ++i) terms[i] = static_cast<int32_t>(i);
  const auto count = static_cast<int64_t>(n);
  const int64_t tile = int64_t{shape.threads} * shape.items;
  if (count <= tile) {
    steps.result = blocks.block(terms, 0, count, tile);
    return steps;
  }
  // GridEvenShare's strip-mine mapping: block b takes tiles b, b + grid, b + 2 grid, ...
  const int64_t tiles = (count + tile - 1) / tile, grid = std::min<int64_t>(tiles, shape.grid);
  std::vector<int32_t> partials;
  partials.reserve(static_cast<size_t>(grid));
  for (int64_t b = 0; b < grid; ++b) partials.push_back(blocks.block(terms, b * tile, count, grid * tile));
  steps.result = blocks.block(partials, 0, grid, tile);  // the single-tile pass over the blocks' sums
  return steps;
}

}  // namespace fplab::sim
