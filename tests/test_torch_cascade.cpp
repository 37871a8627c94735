// torch_cascade(V), PyTorch's CPU sum (sim/torch_cascade.hpp), against ATen's loops written out
// here a second time, plainly: float accumulators from +0, V-lane vectors as arrays, the four-way
// interleave and the cascade's levels with their own counters. Data without zeros, so that +0
// starts and fplab's first-term starts give the same bits. The reference evaluator and the engine
// are both held to it; the trees at 7 and 64 terms are the ones fplab reveal found in Debian's
// torch 1.13 (docs/reveal.md); python/tests/test_torch_cascade.py holds the preset to torch.sum.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "sim/addition_tree.hpp"
#include "sim/engine.hpp"
#include "sim/presets.hpp"
#include "sim/reference_evaluator.hpp"
#include "sim/schedule.hpp"
#include "sim/torch_cascade.hpp"
#include "tests/same_bits.hpp"

using namespace fplab;
using namespace fplab::sim;
using fplab::test::same_bits;

namespace {

using Vec = std::vector<float>;  // one vector register of V lanes

// ATen's multi_row_sum over `rows` rows of 4 elements; element e = load(e).
template <class Load>
std::vector<Vec> aten_multi_row_sum(int64_t rows, size_t lanes, const Load& load) {
  const int64_t ceil_log2 = rows <= 2 ? 1 : 64 - std::countl_zero(static_cast<uint64_t>(rows - 1));
  const int64_t power = std::max<int64_t>(4, ceil_log2 / 4);
  const int64_t step = int64_t{1} << power, mask = step - 1;
  std::vector<std::vector<Vec>> acc(4, std::vector<Vec>(4, Vec(lanes, 0.0f)));
  const auto add = [&](Vec& into, const Vec& from) {
    for (size_t l = 0; l < lanes; ++l) into[l] += from[l];
  };
  int64_t i = 0;
  for (; i + step <= rows;) {
    for (int64_t j = 0; j < step; ++j, ++i)
      for (int k = 0; k < 4; ++k) add(acc[0][k], load(4 * i + k));
    for (int j = 1; j < 4; ++j) {
      for (int k = 0; k < 4; ++k) {
        add(acc[j][k], acc[j - 1][k]);
        acc[j - 1][k] = Vec(lanes, 0.0f);
      }
      if ((i & (mask << (j * power))) != 0) break;
    }
  }
  for (; i < rows; ++i)
    for (int k = 0; k < 4; ++k) add(acc[0][k], load(4 * i + k));
  for (int j = 1; j < 4; ++j)
    for (int k = 0; k < 4; ++k) add(acc[0][k], acc[j][k]);
  return acc[0];
}

template <class Load>
Vec aten_row_sum(int64_t count, size_t lanes, const Load& load) {
  const int64_t rows = count / 4;
  std::vector<Vec> partial = aten_multi_row_sum(rows, lanes, load);
  for (int64_t e = rows * 4; e < count; ++e)
    for (size_t l = 0; l < lanes; ++l) partial[0][l] += load(e)[l];
  for (int k = 1; k < 4; ++k)
    for (size_t l = 0; l < lanes; ++l) partial[0][l] += partial[k][l];
  return partial[0];
}

float aten_sum(const std::vector<float>& x, size_t lanes) {
  const auto n = static_cast<int64_t>(x.size());
  if (n < static_cast<int64_t>(lanes))
    return 0.0f + aten_row_sum(n, 1, [&](int64_t e) { return Vec{x[static_cast<size_t>(e)]}; })[0];
  const int64_t vectors = n / static_cast<int64_t>(lanes);
  const Vec sums = aten_row_sum(vectors, lanes, [&](int64_t e) {
    return Vec(x.begin() + e * static_cast<int64_t>(lanes), x.begin() + (e + 1) * static_cast<int64_t>(lanes));
  });
  float final_sum = 0.0f;
  for (int64_t t = vectors * static_cast<int64_t>(lanes); t < n; ++t) final_sum += x[static_cast<size_t>(t)];
  for (float s : sums) final_sum += s;
  return 0.0f + final_sum;  // the output tensor, filled with 0 and added to
}

std::vector<float> nonzero_values(size_t n, std::mt19937_64& g) {
  std::normal_distribution<float> d;
  std::uniform_int_distribution<int> e(-14, 14);
  std::vector<float> v(n);
  for (float& x : v) {
    do x = std::ldexp(d(g), e(g));
    while (x == 0.0f);
  }
  return v;
}

}  // namespace

TEST_CASE("torch_cascade(V) == ATen's loops written out, reference and engine, V x n") {
  std::mt19937_64 g(42);
  std::vector<size_t> lengths;
  for (size_t n = 1; n <= 300; ++n) lengths.push_back(n);
  for (size_t n : {511, 512, 513, 1023, 1025, 4097, 16 * 64 * 17 + 5, 70001, 300001}) lengths.push_back(n);
  size_t checked = 0;
  for (size_t lanes : {8, 16, 1, 3}) {
    const Schedule s = parse_schedule("all:torch_cascade(" + std::to_string(lanes) + ")");
    for (size_t n : lengths) {
      const auto x = nonzero_values(n, g);
      const std::vector<double> v(x.begin(), x.end());
      const float want = aten_sum(x, lanes);
      INFO("V = " << lanes << ", n = " << n);
      REQUIRE(same_bits(reduce_reference(s, v, Arithmetic{}, NoiseKey{}), want));
      REQUIRE(same_bits(reduce(s, v, Arithmetic{}, NoiseKey{}), want));
      ++checked;
    }
  }
  CHECK(checked == 4 * (300 + 9));
}

TEST_CASE("torch_cascade(8): the trees fplab reveal found in torch 1.13's torch.sum") {
  CHECK(schedule_addition_tree(parse_schedule("all:torch_cascade(8)"), 7).text() == "((((((0+4)+5)+6)+1)+2)+3)");
  CHECK(schedule_addition_tree(parse_schedule("all:torch_cascade(8)"), 64).text() ==
        schedule_addition_tree(parse_schedule("strided(32):seq | strided(8):seq | all:seq"), 64).text());
  CHECK(schedule_addition_tree(parse_schedule("torch-cpu-sum(8)"), 100).text() ==
        schedule_addition_tree(parse_schedule("all:torch_cascade(8)"), 100).text());
}

TEST_CASE("torch_cascade_steps: every term enters once, into one result") {
  for (int lanes : {1, 8, 16}) {
    for (size_t n : {1, 2, 7, 8, 9, 63, 64, 65, 1000, 100003}) {
      const AdditionSteps steps = torch_cascade_steps(n, lanes);
      INFO("V = " << lanes << ", n = " << n);
      REQUIRE(steps.adds.size() == n - 1);
      std::set<int32_t> absorbed;
      for (const auto& [into, from] : steps.adds) {
        REQUIRE(absorbed.count(into) == 0);  // no slot is added to after it was added elsewhere
        REQUIRE(absorbed.insert(from).second);
      }
      CHECK(absorbed.count(steps.result) == 0);
    }
  }
}

TEST_CASE("torch_cascade(V): text, and bad lanes refused in one line") {
  CHECK(to_string(parse_schedule("all:torch_cascade(16)")) == "all:torch_cascade(16)");
  CHECK(to_string(parse_schedule("torch-cpu-sum(16)")) == "all:torch_cascade(16)");
  CHECK(to_string(parse_schedule("torch-cpu-sum")) == "all:torch_cascade(8)");
  CHECK_THROWS_AS(parse_schedule("all:torch_cascade(0)"), ScheduleError);
  CHECK_THROWS_AS(parse_schedule("all:torch_cascade"), ScheduleError);
  CHECK_THROWS_AS(parse_schedule("all:torch_cascade(65)"), ScheduleError);
}

TEST_CASE("torch_cascade(V) as a first stage of groups of other sizes: engine == reference") {
  // The engine keeps one group size's additions; a ragged last group and batched outputs change it.
  std::mt19937_64 g(9);
  for (const char* text : {"contig(100):torch_cascade(8) | all:seq", "strided(7):torch_cascade(16) | all:tree",
                           "split(3):torch_cascade(8) | all:torch_cascade(8)"}) {
    const Schedule s = parse_schedule(text);
    for (size_t n : {1, 9, 250, 1001}) {
      const auto x = nonzero_values(n, g);
      const std::vector<double> v(x.begin(), x.end());
      INFO(text << ", n = " << n);
      CHECK(same_bits(reduce(s, v, Arithmetic{}, NoiseKey{}), reduce_reference(s, v, Arithmetic{}, NoiseKey{})));
    }
  }
}
