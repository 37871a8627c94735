// fplab reveal: trees found by probing, against trees known in advance.
//
// - Schedules as black boxes: each deterministic schedule of a list, evaluated by the reference
//   evaluator in fp32, is probed; the revealed tree must be the schedule's own
//   (sim::schedule_addition_tree), for every n from 2 to 70 - exhaustive over those sizes.
// - Real compiled functions (tests/reveal_targets.cpp, loaded as `fplab reveal --so` loads them):
//   the tree, the schedule it matches, and the replay, bit for bit on random inputs, with the
//   arithmetic the function really uses (fp32, a double accumulator, FMA or rounded products).
// - What is not one tree of float additions (a compensated sum, not a sum) is refused in one line.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "reveal/match_schedule.hpp"
#include "reveal/probe_sum.hpp"
#include "reveal/replay_sum.hpp"
#include "reveal/shared_function.hpp"
#include "sim/addition_tree.hpp"
#include "sim/reference_evaluator.hpp"
#include "sim/schedule.hpp"
#include "sim/schedule_tree.hpp"

using namespace fplab;

namespace {

reveal::SumFunction schedule_as_function(const sim::Schedule& schedule) {
  return [schedule](std::span<const float> x) {
    const std::vector<double> values(x.begin(), x.end());
    return static_cast<float>(sim::reduce_reference(schedule, values, sim::Arithmetic{}, {}));
  };
}

reveal::SharedFunction target(const std::string& symbol) { return {FPLAB_REVEAL_TARGETS, symbol}; }

// Whether reveal names `schedule` among the schedules that give its own tree of n terms.
bool names_its_tree(const std::string& schedule, size_t n) {
  const auto match = reveal::match_schedule(sim::schedule_addition_tree(sim::parse_schedule(schedule), n));
  return std::find(match.schedules.begin(), match.schedules.end(), schedule) != match.schedules.end();
}

// A schedule at a number of terms where reveal must name its tree.
struct Named {
  const char* schedule;
  size_t n;
};

void check_names_their_trees(std::initializer_list<Named> cases) {
  for (const Named c : cases) {
    INFO(c.schedule << ", n = " << c.n);
    CHECK(names_its_tree(c.schedule, c.n));
  }
}

}  // namespace

TEST_CASE("a schedule probed as a black box reveals its own tree", "[reveal]") {
  const std::vector<std::string> schedules = {
      "all:seq", "all:rev", "all:tree", "all:shfl_down", "all:shfl_up", "all:numpy_pairwise",
      "strided(8):seq | all:tree", "contig(4):seq | all:shfl_down", "contig(16):tree | all:seq",
      "split(3):seq | all:tree", "strided(4):rev | contig(2):seq | all:seq"};
  for (const auto& text : schedules) {
    const auto schedule = sim::parse_schedule(text);
    for (size_t n = 2; n <= 70; ++n) {
      INFO(text << ", n = " << n);
      const auto revealed = reveal::reveal_sum(schedule_as_function(schedule), n);
      const auto expected = sim::schedule_addition_tree(schedule, n);
      CHECK(revealed.tree.text() == expected.text());
      CHECK(revealed.tree.additions() == n - 1);  // binary: n - 1 additions
      CHECK(revealed.tree.multi_term_nodes() == 0);
      CHECK(revealed.tree.depth() == sim::schedule_depth(schedule, n));
      CHECK(revealed.calls <= n * (n - 1) / 2);
    }
  }
}

TEST_CASE("PyTorch's CUDA reduction orders are among the candidates reveal names", "[reveal]") {
  // The orders revealed on an H100/H200 (docs/results/reveal_torch.md), at the sizes measured
  check_names_their_trees(
      {Named{"strided(512):seq | contig(4):seq | all:shfl_down", 1000},  // torch.sum
       Named{"strided(2048):seq | contig(4):seq | all:shfl_down", 4096},
       Named{"strided(16):seq | strided(4):seq | all:shfl_down", 64},  // a bias gradient
       Named{"strided(128):seq | strided(32):seq | all:shfl_down", 3136},
       Named{"strided(2048):seq | strided(512):seq | contig(32):shfl_down | all:shfl_down", 12544}});
}

TEST_CASE("split-K GEMMs' slices of whole K tiles are among the candidates reveal names", "[reveal]") {
  // cuBLAS's sgemm_largek on an H100 (docs/results/reveal_torch.md): K = 512 in slices of 104 (13
  // tiles of 8; the last 96), K = 784 in 7 of 112; and a slice that is not a power of two, of 3
  // tiles of 32 over 3 slices (the last 96 - 2 terms short)
  check_names_their_trees({Named{"contig(104):seq | all:seq", 512}, Named{"contig(112):seq | all:seq", 784},
                           Named{"contig(96):seq | all:seq", 286}});
  // another cut is told apart: 5 slices of 103 (split(5)'s, not whole tiles of 8) is not 104's tree
  const auto other =
      reveal::match_schedule(sim::schedule_addition_tree(sim::parse_schedule("contig(103):seq | all:seq"), 512));
  CHECK(std::find(other.schedules.begin(), other.schedules.end(), "contig(104):seq | all:seq") ==
        other.schedules.end());
}

TEST_CASE("NHWC convolutions' orders are among the candidates reveal names: by kernel position", "[reveal]") {
  // cuDNN's TF32 forward and input-gradient kernels of a ResNet-18 on an H200 (64 and 128 channels,
  // 3 x 3, in blocks of 32 or 16 channels; docs/results/reveal_torch.md), and a 5 x 5 kernel's FMA
  // chain over 6 channels
  check_names_their_trees({Named{"each(288)[cols(9)] | all:fused(8,25,tf32rne)", 576},
                           Named{"each(288)[perm(8,7,6,5,4,3,2,1,0) | cols(9)] | all:fused(8,25,tf32rne)", 1152},
                           Named{"each(144)[cols(9)] | all:fused(8,25,tf32rna)", 576},
                           Named{"cols(25) | all:seq", 150}});
}

TEST_CASE("split-K slices of dealt tiles are among the candidates reveal names, read off the tree", "[reveal]") {
  // cuDNN's TF32 weight gradients on an H200 (docs/results/reveal_torch.md): small_cnn's 16 -> 32 at
  // 14 x 14 and 64 or 32 images, its 1 -> 16 at 28 x 28; a fold in hand order, and FMA chains
  check_names_their_trees({Named{"deal(90,64)[all:fused(8,25,tf32rna)] | cols(89) | all:seq", 12544},
                           Named{"deal(90,64)[all:fused(8,25,tf32rna)] | cols(89) | all:seq", 6272},
                           Named{"deal(20,64)[all:fused(8,25,tf32rna)] | cols(19) | all:seq", 4000},
                           Named{"deal(6,16)[all:fused(8,25,tf32)] | all:seq", 500},
                           Named{"deal(6,16)[all:fused(8,25,tf32)] | all:seq", 6 * 16 * 3 + 9},  // a last step of one
                           Named{"deal(5,16)[all:seq] | cols(4) | all:seq", 300}});
  // the fold's order is told apart: slices in hand order are not cols(P - 1)'s tree
  const auto in_order = reveal::match_schedule(
      sim::schedule_addition_tree(sim::parse_schedule("deal(9,16)[all:fused(8,25,tf32rna)] | all:seq"), 1000));
  CHECK(std::find(in_order.schedules.begin(), in_order.schedules.end(),
                  "deal(9,16)[all:fused(8,25,tf32rna)] | cols(8) | all:seq") == in_order.schedules.end());
}

TEST_CASE("chains added in an order of their own are named with that order as a perm", "[reveal]") {
  // cuDNN's fp32 dgrad_engine on an H200 (32 -> 32 at 7 x 7, 32 images, default mode with TF32 on):
  // one FMA chain per kernel position over 32 channels, added 4, 8, 0, 5, 1, 6, 2, 7, 3; and dealt
  // slices folded in another order than cols(P - 1)'s (named with the first addition's two hands
  // in increasing order: they commute)
  check_names_their_trees({Named{"strided(9):seq | perm(4,8,0,5,1,6,2,7,3) | all:seq", 288},
                           Named{"deal(5,16)[all:fused(8,25,tf32rna)] | perm(1,3,4,0,2) | all:seq", 400}});
}

TEST_CASE("hands that chain their terms in runs are named", "[reveal]") {
  // cuBLAS's gemmSN_TN_kernel on an H200 (a linear layer's forward at 8 rows, 288 -> 32): K dealt
  // to 16 threads, each chaining its terms in runs of 16 and adding the runs, the threads chained;
  // with 32 terms each hand is one chain (strided(16)'s tree, named either way)
  check_names_their_trees({Named{"deal(16,1)[contig(16):seq | all:seq] | all:seq", 288},
                           Named{"deal(4,2)[contig(3):seq | all:seq] | cols(3) | all:seq", 100}});
  const auto one_chain = reveal::match_schedule(
      sim::schedule_addition_tree(sim::parse_schedule("deal(16,1)[contig(16):seq | all:seq] | all:seq"), 32));
  CHECK(std::find(one_chain.schedules.begin(), one_chain.schedules.end(), "strided(16):seq | all:seq") !=
        one_chain.schedules.end());
}

TEST_CASE("cuDNN's singleread BatchNorm sums are named", "[reveal]") {
  // a channel of 8 images at 28 x 28, 14 x 14 and 7 x 7 (fewer values than the kernel's 512 threads)
  // and of 64 at 14 x 14: the backward's tree, and the forward's shuffles
  check_names_their_trees({Named{"strided(512):seq | contig(32):tree | all:tree", 6272},
                           Named{"strided(512):seq | contig(32):tree | all:tree", 1568},
                           Named{"strided(512):seq | contig(32):tree | all:shfl_up", 392},
                           Named{"strided(512):seq | contig(32):shfl_down | all:shfl_down", 12544}});
}

TEST_CASE("a sequential sum takes about 2n calls either way, a balanced tree n log2 n / 2", "[reveal]") {
  const size_t n = 1024;
  for (const char* chain : {"all:seq", "all:rev"}) {  // the pivot is random: neither end is a worst case
    const auto revealed = reveal::reveal_sum(schedule_as_function(sim::parse_schedule(chain)), n);
    CHECK(revealed.calls <= 3 * n);
    CHECK(revealed.tree.text() == sim::schedule_addition_tree(sim::parse_schedule(chain), n).text());
  }
  const auto tree = reveal::reveal_sum(schedule_as_function(sim::parse_schedule("all:tree")), n);
  CHECK(tree.calls == n * 10 / 2);  // log2(1024) = 10; FPRev's pairs would be n (n - 1) / 2 = 523776
  CHECK(tree.tree.text() == sim::schedule_addition_tree(sim::parse_schedule("all:tree"), n).text());
}

TEST_CASE("compiled sums: tree, schedule and a bit-identical replay", "[reveal]") {
  struct Case {
    const char* symbol;
    size_t n;
    const char* schedule;
    reveal::Arithmetic arithmetic;
  };
  const Case cases[] = {
      {"seq_sum", 37, "all:seq", reveal::Arithmetic::fp32},
      {"reverse_sum", 20, "all:rev", reveal::Arithmetic::fp32},
      {"lanes8_sum", 64, "strided(8):seq | all:tree", reveal::Arithmetic::fp32},
      {"lanes8_sum", 29, "strided(8):seq | all:tree", reveal::Arithmetic::fp32},
      {"pairwise_sum", 50, "all:tree", reveal::Arithmetic::fp32},
      {"double_sum", 33, "all:seq", reveal::Arithmetic::fp64},
  };
  for (const auto& c : cases) {
    INFO(c.symbol << ", n = " << c.n);
    const auto f = target(c.symbol);
    const auto revealed = reveal::reveal_sum(f.as_sum(), c.n);
    const auto match = reveal::match_schedule(revealed.tree);
    CHECK(std::find(match.schedules.begin(), match.schedules.end(), c.schedule) != match.schedules.end());
    CHECK(revealed.tree.text() == sim::schedule_addition_tree(sim::parse_schedule(c.schedule), c.n).text());
    const auto verified = reveal::verify_sum(f.as_sum(), revealed.tree, 400, 7);
    CHECK(verified.scores[0].arithmetic == c.arithmetic);
    CHECK(verified.scores[0].identical == 400);
    if (c.arithmetic == reveal::Arithmetic::fp64) CHECK(verified.scores[1].identical < 400);  // fp32 differs
  }
}

TEST_CASE("compiled dot products: FMA, rounded products, or those in a double, told apart by the replay", "[reveal]") {
  for (const auto& [symbol, arithmetic] :
       {std::pair{"fma_dot", reveal::Arithmetic::fp32_fused}, std::pair{"rounded_dot", reveal::Arithmetic::fp32_rounded},
        std::pair{"float_products_double_sum_dot", reveal::Arithmetic::fp64_rounded}}) {
    INFO(symbol);
    const auto f = target(symbol);
    const auto dot = f.as_dot();
    const auto revealed = reveal::reveal_sum(reveal::dot_with_ones(dot), 24);
    CHECK(revealed.tree.text() == sim::schedule_addition_tree(sim::parse_schedule("all:seq"), 24).text());
    const auto verified = reveal::verify_dot(dot, revealed.tree, 400, 3);
    CHECK(verified.scores[0].arithmetic == arithmetic);
    CHECK(verified.scores[0].identical == 400);
    CHECK(verified.scores[1].identical < 400);
  }
}

TEST_CASE("BLAS's signatures: cblas_sdot and one output of cblas_sgemm, revealed and replayed", "[reveal]") {
  const auto sdot = target("lanes8_cblas_sdot").as_cblas_sdot();
  for (size_t n : {9, 40}) {
    INFO("lanes8_cblas_sdot, n = " << n);
    const auto revealed = reveal::reveal_sum(reveal::dot_with_ones(sdot), n);
    CHECK(revealed.tree.text() ==
          sim::schedule_addition_tree(sim::parse_schedule("strided(8):seq | all:tree"), n).text());
    const auto verified = reveal::verify_dot(sdot, revealed.tree, 300, 5);
    CHECK(verified.scores[0].arithmetic == reveal::Arithmetic::fp32_rounded);
    CHECK(verified.scores[0].identical == 300);
  }
  // Output (0, 0) of a 5 x n by n x 3 product: its chain over K, whatever the other entries hold.
  const auto sgemm = target("fma_chain_cblas_sgemm").as_cblas_sgemm(5, 3);
  for (size_t n : {2, 33}) {
    INFO("fma_chain_cblas_sgemm, n = " << n);
    const auto revealed = reveal::reveal_sum(reveal::dot_with_ones(sgemm), n);
    CHECK(revealed.tree.text() == sim::schedule_addition_tree(sim::parse_schedule("all:seq"), n).text());
    const auto verified = reveal::verify_dot(sgemm, revealed.tree, 300, 6);
    CHECK(verified.scores[0].arithmetic == reveal::Arithmetic::fp32_fused);
    CHECK(verified.scores[0].identical == 300);
  }
  CHECK_THROWS_AS(target("fma_chain_cblas_sgemm").as_cblas_sgemm(0, 3), reveal::RevealError);
}

TEST_CASE("a TF32 tensor-core dot: steps of eight, its factors' rounding told apart", "[reveal]") {
  const auto f = target("tf32_mma8_dot");
  const auto dot = f.as_dot();
  using reveal::Arithmetic;
  for (size_t n : {10, 64, 131}) {
    INFO(n);
    const auto revealed = reveal::reveal_sum(reveal::dot_with_ones(dot), n);
    CHECK(revealed.tree.text() == sim::schedule_addition_tree(sim::parse_schedule("tc-h100-tf32"), n).text());
    const auto verified = reveal::verify_dot(dot, revealed.tree, 200, 11);
    for (const auto& s : verified.scores) {
      INFO(reveal::arithmetic_name(s.arithmetic));
      // Random factors almost never lie halfway between two tf32 values: ties to even and away
      // from zero can both replay every trial; truncation, FMA chains and fp64 cannot.
      if (s.arithmetic == Arithmetic::tf32_nearest_away_fused) CHECK(s.identical == 200);
      else if (s.arithmetic != Arithmetic::tf32_nearest_even_fused) CHECK(s.identical < 200);
    }
    // Factors halfway between two tf32 values (1 + 2^-11: ten fraction bits and a half) tell the
    // ties apart.
    std::vector<float> a(n, 1.0f + 0x1p-11f), b(n, 1.0f);
    a[1] = -1.0f - 0x3p-11f;
    const float real = dot(a, b);
    CHECK(reveal::replay_dot(revealed.tree, a, b, Arithmetic::tf32_nearest_away_fused) == real);
    CHECK(reveal::replay_dot(revealed.tree, a, b, Arithmetic::tf32_nearest_even_fused) != real);
    // The grammar says it too: the preset tc-h100-tf32-rna, evaluated by the reference evaluator,
    // gives the box's bits, on the ties and on random factors.
    const auto preset = sim::parse_schedule("tc-h100-tf32-rna");
    const auto by_schedule = [&](std::span<const float> x, std::span<const float> y) {
      const std::vector<double> xd(x.begin(), x.end()), yd(y.begin(), y.end());
      return static_cast<float>(sim::dot_reference(preset, xd, yd, sim::Arithmetic{}));
    };
    CHECK(by_schedule(a, b) == real);
    std::mt19937_64 g(n);
    std::normal_distribution<float> normal;
    for (int t = 0; t < 200; ++t) {
      for (size_t i = 0; i < n; ++i) a[i] = normal(g), b[i] = normal(g);
      CHECK(std::bit_cast<uint32_t>(by_schedule(a, b)) == std::bit_cast<uint32_t>(dot(a, b)));
    }
  }
}

TEST_CASE("what is not one tree of float additions is refused", "[reveal]") {
  CHECK_THROWS_AS(reveal::reveal_sum(target("twice_the_first").as_sum(), 16), reveal::RevealError);
  // Kahan's compensation recovers the absorbed 1s: either the counts contradict a tree, or the
  // tree they suggest does not replay.
  try {
    const auto f = target("kahan_sum");
    const auto revealed = reveal::reveal_sum(f.as_sum(), 16);
    const auto verified = reveal::verify_sum(f.as_sum(), revealed.tree, 200, 5);
    CHECK(verified.scores[0].identical < 200);
  } catch (const reveal::RevealError&) {
    SUCCEED("refused");
  }
  CHECK_THROWS_WITH(target("no_such_function"), Catch::Contains("no symbol no_such_function"));
  CHECK_THROWS_WITH(reveal::SharedFunction("/nonexistent/lib.so", "f"), Catch::Contains("cannot load"));
  CHECK_THROWS_AS(reveal::reveal_sum(target("seq_sum").as_sum(), 1), reveal::RevealError);
}
