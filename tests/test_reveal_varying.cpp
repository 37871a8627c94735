// fplab reveal of sums whose order changes from call to call: schedules with atomic steps,
// evaluated by the reference evaluator with another implementation seed at every call, probed
// as black boxes. The skeleton (the parts and their trees) must be the schedule's own, the chain
// of parts must show in the meets' sizes, and the arrival order must look uniformly random, as
// fplab's atomic draws it; a deterministic sum must come back as one part, its own tree.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "reveal/match_schedule.hpp"
#include "reveal/probe_varying_sum.hpp"
#include "reveal/replay_varying_sum.hpp"
#include "sim/addition_tree.hpp"
#include "sim/reference_evaluator.hpp"
#include "sim/schedule.hpp"

using namespace fplab;

namespace {

// The schedule in fp32, with another implementation seed at every call (atomics: another order).
reveal::SumFunction varying_function(const sim::Schedule& schedule) {
  auto calls = std::make_shared<uint64_t>(0);
  return [schedule, calls](std::span<const float> x) {
    const std::vector<double> values(x.begin(), x.end());
    sim::NoiseKey key;
    key.impl_seed = ++*calls;
    return static_cast<float>(sim::reduce_reference(schedule, values, sim::Arithmetic{}, key));
  };
}

// The tree of the first stage of `schedule` alone on the terms of one part.
std::string part_tree(const std::string& stage, size_t terms) {
  return sim::schedule_addition_tree(sim::parse_schedule(stage), terms).text();
}

}  // namespace

TEST_CASE("atomics over blocks: the blocks' trees, a chain of them, a uniformly random order", "[reveal]") {
  struct Case {
    const char* schedule;
    size_t n, parts;
    const char* inner;  // the first stage on one part's terms
    const char* matched;
  };
  for (const Case& c : {Case{"contig(16):seq | all:atomic", 128, 8, "all:seq", "contig(16):seq | all:atomic"},
                        Case{"contig(8):tree | all:atomic", 64, 8, "all:tree", "contig(8):tree | all:atomic"},
                        Case{"strided(4):seq | all:atomic", 40, 4, "all:seq", "strided(4):seq | all:atomic"},
                        Case{"strided(9):seq | all:atomic", 72, 9, "all:seq", "strided(9):seq | all:atomic"},
                        Case{"all:atomic", 12, 12, "all:seq", "all:atomic"}}) {
    INFO(c.schedule);
    const auto revealed = reveal::reveal_varying_sum(varying_function(sim::parse_schedule(c.schedule)), c.n, 8);
    CHECK(revealed.varies);
    REQUIRE(revealed.parts.size() == c.parts);
    const size_t size = c.n / c.parts;
    const bool strided = std::string(c.schedule).rfind("strided", 0) == 0;  // lanes: part k holds k, k + P, ...
    for (size_t k = 0; k < c.parts; ++k) {
      REQUIRE(revealed.parts[k].size() == size);
      for (size_t m = 0; m < size; ++m) CHECK(revealed.parts[k][m] == (strided ? k + m * c.parts : k * size + m));
    }
    // The skeleton, read with each part's terms renamed 0 .. size - 1, is the first stage's tree.
    const sim::AdditionTree chain = reveal::chained_skeleton(revealed);
    CHECK(chain.additions() == c.n - 1);
    CHECK(revealed.skeleton.multi_term_nodes() == 1);  // the root, whose order varies
    if (!strided) CHECK(revealed.skeleton.text().rfind("(" + part_tree(c.inner, size), 0) == 0);
    CHECK(revealed.chain_of_parts);
    size_t met = 0;
    for (const auto& [k, calls] : revealed.parts_met) {
      CHECK(k >= 2);
      CHECK(k <= c.parts);
      met += calls;
    }
    size_t crossed = 0;
    for (const auto& [s, calls] : revealed.cross_meets) crossed += calls;
    CHECK(met == crossed);
    CHECK(met >= size * c.parts * (c.parts - 1) / 2);  // each part's pivot: every later part's terms, once or more
    CHECK(revealed.uniform_order_distance >= 0);
    // Sampling alone moves the distance by about sqrt(P / calls) (0.03 to 0.15 here).
    CHECK(revealed.uniform_order_distance < 1.5 * std::sqrt(static_cast<double>(c.parts) / static_cast<double>(met)));
    const auto match = reveal::match_varying_schedule(revealed);
    CHECK(std::find(match.schedules.begin(), match.schedules.end(), c.matched) != match.schedules.end());
  }
}

TEST_CASE("tiles that restart at every image are named: each(S)[contig(G):seq] | all:atomic", "[reveal]") {
  // Images of 10 terms in tiles of 4: parts of 4, 4, 2, 4, 4, 2, ... (cuDNN's 784 = 512 + 272).
  for (const auto& [text, n, parts] : {std::tuple{"each(10)[contig(4):seq] | all:atomic", size_t{50}, size_t{15}},
                                       std::tuple{"each(7)[contig(4):seq] | all:atomic", size_t{30}, size_t{9}}}) {
    INFO(text);
    const auto revealed = reveal::reveal_varying_sum(varying_function(sim::parse_schedule(text)), n, 6);
    CHECK(revealed.varies);
    CHECK(revealed.parts.size() == parts);
    const auto match = reveal::match_varying_schedule(revealed);
    CHECK(std::find(match.schedules.begin(), match.schedules.end(), std::string(text)) != match.schedules.end());
  }
}

TEST_CASE("a varying skeleton replays: some order of the replayed parts gives every call's bits", "[reveal]") {
  const auto seq_blocks = sim::parse_schedule("contig(16):seq | all:atomic");
  const auto revealed = reveal::reveal_varying_sum(varying_function(seq_blocks), 96, 6);
  const auto v = reveal::verify_varying_sum(varying_function(seq_blocks), revealed, 16, 3);
  CHECK(v.every_order);
  CHECK(v.orders == 720);         // 6 parts
  REQUIRE(v.scores.size() == 1);  // fp32 only: the parts are added as floats
  CHECK(v.scores[0].identical == 16);
  CHECK(v.distinct_results >= 1);
  // The same skeleton against blocks summed the other way round: most calls have no such order.
  const auto other =
      reveal::verify_varying_sum(varying_function(sim::parse_schedule("contig(16):rev | all:atomic")), revealed, 16, 3);
  CHECK(other.scores[0].identical < 12);
  // A dot product: blocks of FMA chains added in any order.
  const auto dot_blocks = [schedule = seq_blocks, calls = std::make_shared<uint64_t>(0)](std::span<const float> a,
                                                                                         std::span<const float> b) {
    sim::NoiseKey key;
    key.impl_seed = ++*calls;
    return static_cast<float>(sim::dot_reference(schedule, std::vector<double>(a.begin(), a.end()),
                                                 std::vector<double>(b.begin(), b.end()), sim::Arithmetic{}, key));
  };
  const auto dot_revealed = reveal::reveal_varying_sum(reveal::dot_with_ones(dot_blocks), 64, 6);
  REQUIRE(dot_revealed.parts.size() == 4);
  const auto dv = reveal::verify_varying_dot(dot_blocks, dot_revealed, 12, 5);
  CHECK(dv.scores[0].identical == 12);
  CHECK(reveal::arithmetic_name(dv.scores[0].arithmetic) == "fp32, products fused (FMA) onto the partial sum");
}

TEST_CASE("a deterministic sum probed for variation is one part, its own tree", "[reveal]") {
  for (const char* text : {"contig(4):seq | all:tree", "all:seq", "strided(8):seq | all:shfl_down"}) {
    INFO(text);
    const auto schedule = sim::parse_schedule(text);
    const auto revealed = reveal::reveal_varying_sum(varying_function(schedule), 48, 3);
    CHECK_FALSE(revealed.varies);
    REQUIRE(revealed.parts.size() == 1);
    CHECK(revealed.parts[0].size() == 48);
    CHECK(revealed.skeleton.text() == sim::schedule_addition_tree(schedule, 48).text());
    CHECK(revealed.cross_meets.empty());
  }
}

TEST_CASE("atomics at two levels: no stable block, and an order unlike one random chain", "[reveal]") {
  // Within blocks of 8 the order varies too, so every part is one term; the meets then follow two
  // levels of arrivals, not one uniformly random chain of 32 terms.
  const auto revealed =
      reveal::reveal_varying_sum(varying_function(sim::parse_schedule("contig(8):atomic | all:atomic")), 32, 6);
  CHECK(revealed.varies);
  CHECK(revealed.parts.size() == 32);
  CHECK(revealed.uniform_order_distance > 0.15);
}

TEST_CASE("bad arguments to the varying probe are refused in one line", "[reveal]") {
  const auto f = varying_function(sim::parse_schedule("all:atomic"));
  CHECK_THROWS_AS(reveal::reveal_varying_sum(f, 1, 4), reveal::RevealError);
  CHECK_THROWS_AS(reveal::reveal_varying_sum(f, 16, 1), reveal::RevealError);
}
