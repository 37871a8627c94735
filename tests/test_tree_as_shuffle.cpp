// sim::trees_as_shuffles: where it rewrites a schedule for n terms, the rewritten schedule's sum
// is the original's bit for bit (the reference evaluator of each, on random terms of several
// spreads), and it refuses exactly where a tree stage meets a group whose size is not a power of
// two.
#include <catch2/catch.hpp>

#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include "sim/reference_evaluator.hpp"
#include "sim/tree_as_shuffle.hpp"

using namespace fplab;
using namespace fplab::sim;

namespace {
uint64_t bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
}  // namespace

TEST_CASE("trees_as_shuffles: cuDNN's BatchNorm backward order, by the terms' count") {
  const Schedule cudnn = parse_schedule("strided(512):seq | contig(32):tree | all:tree");
  // n >= 512: 16 warps of 32 partials; 64 and 32: two warps and one; 100: warps of 32, 32, 32 and 4
  for (size_t n : {64u, 32u, 100u, 576u, 3136u, 12544u, 50176u}) {
    INFO(n << " terms");
    const auto rewritten = trees_as_shuffles(cudnn, n);
    REQUIRE(rewritten.has_value());
    CHECK(to_string(*rewritten) == "strided(512):seq | contig(32):shfl_up | all:shfl_up");
  }
  // 50 terms: a warp of 18 partials; 200: 7 warps in the block's tree
  for (size_t n : {50u, 200u, 3u}) {
    INFO(n << " terms");
    CHECK_FALSE(trees_as_shuffles(cudnn, n).has_value());
  }
  CHECK_FALSE(trees_as_shuffles(parse_schedule("strided(512):seq | contig(32):shfl_down | all:shfl_down"), 4096));
  CHECK_FALSE(trees_as_shuffles(parse_schedule("shuffle | contig(4):tree | all:seq"), 64));
}

TEST_CASE("trees_as_shuffles: the rewritten schedule adds the same bits") {
  std::mt19937_64 g(5);
  std::lognormal_distribution<float> spread(0.0f, 3.0f);
  std::uniform_int_distribution<int> sign(0, 1);
  const char* texts[] = {"strided(512):seq | contig(32):tree | all:tree", "contig(8):tree | all:tree",
                         "strided(4):tree | contig(2):seq | all:tree", "all:tree", "contig(16):seq | all:tree"};
  size_t rewrites = 0;
  for (const char* text : texts)
    for (size_t n : {1u, 2u, 8u, 16u, 64u, 128u, 1024u, 4096u, 40u, 96u}) {
      const Schedule original = parse_schedule(text);
      const auto rewritten = trees_as_shuffles(original, n);
      if (!rewritten) continue;
      ++rewrites;
      for (int trial = 0; trial < 8; ++trial) {
        std::vector<double> x(n);
        for (auto& v : x) v = static_cast<float>(sign(g) ? spread(g) : -spread(g));
        INFO(text << ", " << n << " terms, trial " << trial);
        CHECK(bits(reduce_reference(original, x, Arithmetic{})) == bits(reduce_reference(*rewritten, x, Arithmetic{})));
      }
    }
  CHECK(rewrites >= 30);  // not a test of nothing: most (schedule, n) pairs have power-of-two groups
}
