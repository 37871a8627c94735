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
      for (int t = 0; t < threads; ++t) add(sums[static_cast<size_t>(t)], thread_tree(items, at, t));
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
      for (int64_t o = 1; o < lanes; o *= 2)
        for (int64_t i = 0; i + o < lanes; i += 2 * o) add(lane[static_cast<size_t>(i)], lane[static_cast<size_t>(i + o)]);
      add(block_sum, lane[0]);
    }
    return *block_sum;
  }

 private:
  // Thread t's items of the full tile at `at`, vectors of V at (v·T + t)·V, as a balanced tree.
  int32_t thread_tree(const std::vector<int32_t>& items, int64_t at, int t) {
    std::vector<int32_t> registers;
    registers.reserve(static_cast<size_t>(shape_.items));
    const int vector = shape_.vector;
    for (int v = 0; v < shape_.items / vector; ++v)
      for (int j = 0; j < vector; ++j)
        registers.push_back(items[static_cast<size_t>(at + (int64_t{v} * shape_.threads + t) * vector + j)]);
    return tree(registers, 0, registers.size());
  }

  int32_t tree(const std::vector<int32_t>& r, size_t lo, size_t hi) {
    if (hi - lo == 1) return r[lo];
    const size_t mid = lo + (hi - lo) / 2;
    const int32_t left = tree(r, lo, mid), right = tree(r, mid, hi);
    steps_.adds.emplace_back(left, right);
    return left;
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
