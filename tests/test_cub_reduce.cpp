// cub_reduce(T,I,V,G), CUB's DeviceReduce::Sum (sim/cub_reduce.hpp), against what fplab reveal
// found in CUDA 13.0's CUB on an H200: the revealed trees at 32, 100, 1000, 4097, 5000 and 16384 terms
// (docs/results/reveal_cub_h200/, the JSON reports of `fplab reveal --so libcub_sum.so`) must be
// the preset's trees exactly. The parts those sizes do not reach (blocks of several tiles, a grid
// cap) are held to a plain walk of the same description written here a second time; and the
// reference evaluator and the engine agree on random terms. The grid cap was read from CUB's bits
// at 25 million terms on the H200 (docs/reveal.md), too long for a test here.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "sim/addition_tree.hpp"
#include "sim/cub_reduce.hpp"
#include "sim/engine.hpp"
#include "sim/reference_evaluator.hpp"
#include "sim/schedule.hpp"
#include "tests/same_bits.hpp"

using namespace fplab;
using namespace fplab::sim;
using fplab::test::same_bits;

namespace {

// The "tree" string of a JSON report (the only string value holding '(' in it).
std::string revealed_tree(size_t n) {
  const std::string path = std::string(FPLAB_SOURCE_DIR) + "/docs/results/reveal_cub_h200/cub_" + std::to_string(n) + ".json";
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str(), key = "\"tree\": \"";
  const size_t at = json.find(key);
  REQUIRE(at != std::string::npos);
  const size_t begin = at + key.size();
  return json.substr(begin, json.find('"', begin) - begin);
}

// The description of sim/cub_reduce.hpp walked plainly in doubles (each addition rounded to
// float), tile by tile over the whole input: tile i goes to block i mod blocks, whose threads keep
// their running sums; the blocks finish after every tile is dealt.
struct PlainCub {
  int threads, items, vector;
  int64_t grid;

  struct Block {
    std::vector<std::optional<double>> sum;
    int64_t valid_threads = 0;  // 0: no tile yet
  };

  // CUB's ThreadReduceBinaryTree and WarpReduceShfl: at stride 1, 2, 4, … each element whose index
  // is a multiple of twice the stride takes the element one stride on, if there is one.
  static double pairing(std::vector<double> r) {
    for (size_t stride = 1; stride < r.size(); stride *= 2)
      for (size_t j = 0; j + stride < r.size(); j += 2 * stride) r[j] = static_cast<float>(r[j] + r[j + stride]);
    return r[0];
  }
  static void add(std::optional<double>& into, double x) { into = into ? static_cast<float>(*into + x) : x; }

  void take_tile(Block& b, const std::vector<double>& x, int64_t at) const {
    const auto n = static_cast<int64_t>(x.size());
    const int64_t tile = int64_t{threads} * items;
    if (b.sum.empty()) b.sum.resize(static_cast<size_t>(threads));
    if (at + tile <= n) {
      if (b.valid_threads == 0) b.valid_threads = threads;
      for (int t = 0; t < threads; ++t) {
        std::vector<double> r;  // ThreadReduce with the running sum as its prefix
        if (auto& s = b.sum[static_cast<size_t>(t)]) r.push_back(*s);
        for (int v = 0; v < items / vector; ++v)
          for (int j = 0; j < vector; ++j) r.push_back(x[static_cast<size_t>(at + (int64_t{v} * threads + t) * vector + j)]);
        b.sum[static_cast<size_t>(t)] = pairing(r);
      }
      return;
    }
    if (b.valid_threads == 0) b.valid_threads = std::min<int64_t>(n - at, threads);
    for (int t = 0; t < threads; ++t)
      for (int64_t i = at + t; i < n; i += threads) add(b.sum[static_cast<size_t>(t)], x[static_cast<size_t>(i)]);
  }

  static double finish(const Block& b) {
    std::optional<double> total;
    for (int64_t w = 0; w * 32 < b.valid_threads; ++w) {
      std::vector<double> lane;
      for (int64_t l = w * 32; l < std::min<int64_t>(b.valid_threads, w * 32 + 32); ++l) lane.push_back(*b.sum[static_cast<size_t>(l)]);
      add(total, pairing(lane));
    }
    return *total;
  }

  // One block over all of x (the single-tile kernel and the second pass).
  double one_block(const std::vector<double>& x) const {
    const int64_t tile = int64_t{threads} * items;
    Block b;
    for (int64_t at = 0; at < static_cast<int64_t>(x.size()); at += tile) take_tile(b, x, at);
    return finish(b);
  }

  double sum(const std::vector<double>& x) const {
    const auto n = static_cast<int64_t>(x.size());
    const int64_t tile = int64_t{threads} * items;
    if (n <= tile) return one_block(x);
    const int64_t tiles = (n + tile - 1) / tile, blocks = std::min(tiles, grid);
    std::vector<Block> block(static_cast<size_t>(blocks));
    for (int64_t i = 0; i < tiles; ++i) take_tile(block[static_cast<size_t>(i % blocks)], x, i * tile);
    std::vector<double> partial;
    for (const auto& b : block) partial.push_back(finish(b));
    return one_block(partial);
  }
};

}  // namespace

TEST_CASE("cub-reduce: the trees fplab reveal found in CUDA 13's cub::DeviceReduce::Sum on an H200") {
  const Schedule cub = parse_schedule("cub-reduce");
  for (size_t n : {32, 100, 1000, 4097, 5000, 16384}) {
    INFO("n = " << n);
    CHECK(schedule_addition_tree(cub, n).text() == revealed_tree(n));
  }
  // n = 100 is warps of 32 added in order: the grammar's own words for it
  CHECK(schedule_addition_tree(cub, 100).text() == schedule_addition_tree(parse_schedule("contig(32):tree | all:seq"), 100).text());
  CHECK(schedule_addition_tree(cub, 1000).text() ==
        schedule_addition_tree(parse_schedule("strided(256):seq | contig(32):shfl_up | all:seq"), 1000).text());
}

TEST_CASE("cub_reduce: a later tile's items meet the thread's running sum in the tree, not as a sum of their own") {
  // One block of 32 threads taking two tiles of 2 items (V = 1): thread 0 holds terms 0 and 32,
  // then 64 and 96. ThreadReduce with a prefix reduces [sum, 64, 96] by pairing: (sum + 64) + 96.
  const std::string tree = schedule_addition_tree(parse_schedule("all:cub_reduce(32,2,1,1)"), 128).text();
  CHECK(tree.find("(((0+32)+64)+96)") != std::string::npos);
  CHECK(tree.find("((0+32)+(64+96))") == std::string::npos);
}

TEST_CASE("cub_reduce == its description walked plainly, reference and engine, shapes and sizes") {
  std::mt19937_64 g(11);
  std::normal_distribution<double> d;
  const Arithmetic fp32;
  struct Case {
    const char* text;
    PlainCub plain;
  };
  const Case cases[] = {
      {"all:cub_reduce(256,16,4,5280)", {256, 16, 4, 5280}},
      {"all:cub_reduce(64,8,4,3)", {64, 8, 4, 3}},  // several tiles a block, a partial last tile
      {"all:cub_reduce(32,4,1,2)", {32, 4, 1, 2}},  // scalar loads
      {"all:cub_reduce(96,6,2,5)", {96, 6, 2, 5}},  // three warps, six items in pairs
      // 32-term tiles: blocks of several full tiles (the running sum in front of a tile's items)
      // and a second pass over more than one tile of block sums
      {"all:cub_reduce(32,1,1,100)", {32, 1, 1, 100}},
      {"all:cub_reduce(64,4,4,7)", {64, 4, 4, 7}},
  };
  for (const auto& c : cases) {
    const Schedule s = parse_schedule(c.text);
    for (size_t n : {1, 2, 31, 33, 255, 256, 257, 511, 512, 1000, 1537, 4095, 4096, 4097, 9000, 20011}) {
      std::vector<double> x(n);
      for (auto& v : x) v = static_cast<float>(d(g) * std::exp2(std::floor(3 * d(g))));
      INFO(c.text << ", n = " << n);
      const double want = c.plain.sum(x);
      REQUIRE(same_bits(reduce_reference(s, x, fp32), want));
      double engine = 0;
      reduce_batch(s, x.data(), n, 1, fp32, {}, &engine);
      REQUIRE(same_bits(engine, want));
    }
  }
}

TEST_CASE("cub_reduce_steps: every term enters once, into one result") {
  for (const auto& shape : {Reducer::CubShape{256, 16, 4, 5280}, Reducer::CubShape{64, 8, 4, 3}}) {
    for (size_t n : {1, 5, 64, 100, 4096, 4097, 70000}) {
      const AdditionSteps steps = cub_reduce_steps(n, shape);
      CHECK(steps.adds.size() == n - 1);
      std::vector<int> absorbed(n, 0);
      for (const auto& [into, from] : steps.adds) {
        CHECK(into != from);
        ++absorbed[static_cast<size_t>(from)];
      }
      for (size_t i = 0; i < n; ++i) CHECK(absorbed[i] == (static_cast<int32_t>(i) == steps.result ? 0 : 1));
    }
  }
}

TEST_CASE("cub_reduce(T,I,V,G): text, preset, and bad shapes refused in one line") {
  CHECK(to_string(parse_schedule("cub-reduce")) == "all:cub_reduce(256,16,4,5280)");
  CHECK(to_string(parse_schedule("cub-reduce(100)")) == "all:cub_reduce(256,16,4,100)");
  CHECK(to_string(parse_schedule("contig(4096):cub_reduce(128,8,4,1) | all:seq")) ==
        "contig(4096):cub_reduce(128,8,4,1) | all:seq");
  for (const char* bad : {"all:cub_reduce(250,16,4,1)", "all:cub_reduce(256,15,4,1)", "all:cub_reduce(256,16,4,0)",
                          "all:cub_reduce(256,16,4)", "all:cub_reduce"}) {
    INFO(bad);
    try {
      parse_schedule(bad);
      FAIL("accepted");
    } catch (const ScheduleError& e) {
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
  }
}
