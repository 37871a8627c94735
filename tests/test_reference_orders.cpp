// The reference evaluator held against independent statements of the same orders: plain host
// float loops, the summation orders of `fplab sum`, and identities between schedules that take
// different code paths (a warp shuffle is a cascade of strided pairings). Plus the properties
// that define exact, binned and atomic.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <set>

#include "fp/round.hpp"
#include "sim/generate.hpp"
#include "sim/reference_evaluator.hpp"
#include "sim/summation_order.hpp"

using namespace fplab;
using namespace fplab::sim;

namespace {

bool same_bits(double x, double y) { return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y); }

std::vector<double> floats(size_t n, std::mt19937_64& g) {
  std::normal_distribution<float> d;
  std::vector<double> v(n);
  for (auto& x : v) x = d(g) * std::exp2(static_cast<float>(static_cast<int>(g() % 20) - 10));
  return v;
}

// "strided(n/2):seq | strided(n/4):seq | ... | strided(1):seq": pairs i and i + offset.
std::string strided_cascade(size_t n) {
  std::string s;
  for (size_t o = n / 2; o >= 1; o /= 2) s += (s.empty() ? "" : " | ") + ("strided(" + std::to_string(o) + "):seq");
  return s;
}
std::string contig_pair_cascade(size_t n) {
  std::string s;
  for (size_t o = 1; o < n; o *= 2) s += (s.empty() ? "" : " | ") + std::string("contig(2):seq");
  return s;
}

}  // namespace

TEST_CASE("reference fp32/rne equals plain host float loops: seq, rev, tree, FMA chain, shfl_down") {
  std::mt19937_64 g(1);
  const Arithmetic fp32;  // fp32, rne, fused products
  for (size_t n : {1, 2, 3, 5, 32, 100, 1000, 4096}) {
    const auto v = floats(n, g), w = floats(n, g);
    float seq = static_cast<float>(v[0]), rev = static_cast<float>(v[n - 1]), chain = float(v[0]) * float(w[0]);
    for (size_t i = 1; i < n; ++i) {
      seq += static_cast<float>(v[i]);
      rev = static_cast<float>(v[n - 1 - i]) + rev;
      chain = std::fma(static_cast<float>(v[i]), static_cast<float>(w[i]), chain);
    }
    std::vector<float> lanes(v.begin(), v.end());
    for (size_t o = std::bit_ceil(n) / 2; o >= 1; o /= 2)
      for (size_t i = 0; i < o && i + o < n; ++i) lanes[i] += lanes[i + o];
    INFO("n = " << n);
    CHECK(same_bits(reduce_reference(parse_schedule("all:seq"), v, fp32), seq));
    CHECK(same_bits(reduce_reference(parse_schedule("all:rev"), v, fp32), rev));
    CHECK(same_bits(reduce_reference(parse_schedule("all:shfl_down"), v, fp32), lanes[0]));
    CHECK(same_bits(dot_reference(parse_schedule("all:seq"), v, w, fp32), chain));
  }
}

TEST_CASE(
    "reference equals fplab sum's orders (seq, rev, pairwise) in bf16, fp16 and fp64 under every deterministic mode") {
  std::mt19937_64 g(2);
  for (auto f : {fp::bf16(), fp::fp16(), fp::fp64()}) {
    for (auto mode : {fp::Mode::rne, fp::Mode::rna, fp::Mode::rz, fp::Mode::ru, fp::Mode::rd, fp::Mode::ro}) {
      Arithmetic ar;
      ar.format = f;
      ar.mode = mode;
      for (size_t n : {1, 2, 9, 100, 777}) {
        auto v = floats(n, g);
        for (auto& x : v) x = fp::round_double(x, f, {}).value;
        const fp::RoundingOptions o{mode};
        INFO(f.name << " " << fp::mode_name(mode) << " n=" << n);
        CHECK(same_bits(reduce_reference(parse_schedule("all:seq"), v, ar), fold_left(v, f, o)));
        CHECK(same_bits(reduce_reference(parse_schedule("all:rev"), v, ar), fold_right(v, f, o)));
        CHECK(same_bits(reduce_reference(parse_schedule("all:tree"), v, ar), pairwise_tree(v, f, o)));
      }
    }
  }
}

TEST_CASE(
    "warp shuffles are cascades of pairings: shfl_down/xor = strided cascade, shfl_up = tree = contig(2) cascade") {
  std::mt19937_64 g(3);
  Arithmetic ar;
  ar.format = fp::bf16();
  for (size_t n : {2, 4, 8, 16, 32, 64, 256}) {
    auto v = floats(n, g);
    for (auto& x : v) x = fp::round_double(x, ar.format, {}).value;
    const double down = reduce_reference(parse_schedule("all:shfl_down"), v, ar);
    INFO("n = " << n);
    CHECK(same_bits(down, reduce_reference(parse_schedule(strided_cascade(n)), v, ar)));
    CHECK(same_bits(down, reduce_reference(parse_schedule("all:shfl_xor"), v, ar)));
    const double up = reduce_reference(parse_schedule("all:shfl_up"), v, ar);
    CHECK(same_bits(up, reduce_reference(parse_schedule(contig_pair_cascade(n)), v, ar)));
    CHECK(same_bits(up, reduce_reference(parse_schedule("all:tree"), v, ar)));
  }
}

TEST_CASE("exact and binned give the same bits under every one of 200 permutations of cancelling data, every format") {
  std::mt19937_64 g(4);
  for (auto f : {fp::fp32(), fp::bf16(), fp::fp16(), fp::e5m2(), fp::fp64()}) {
    Arithmetic ar;
    ar.format = f;
    auto v = generate("cancel:1001", 5);
    for (auto& x : v) x = fp::round_double(x, f, {}).value;
    for (const char* text : {"exact", "binned", "shuffle | all:binned"}) {
      const Schedule s = parse_schedule(text);
      const double first = reduce_reference(s, v, ar, {1});
      for (int p = 0; p < 200; ++p) {
        std::shuffle(v.begin(), v.end(), g);
        INFO(text << " " << f.name << " permutation " << p);
        REQUIRE(same_bits(reduce_reference(s, v, ar, {static_cast<uint64_t>(p)}), first));
      }
    }
  }
}

TEST_CASE(
    "atomic: the same impl seed replays the same bits; different seeds give different results on cancelling data") {
  Arithmetic ar;
  const auto v = generate("cancel:2000", 6);
  for (const char* text : {"atomic", "splitk-atomic(16)", "cuda-naive-sum(32,8)", "permuted"}) {
    const Schedule s = parse_schedule(text);
    std::set<uint64_t> distinct;
    for (uint64_t seed = 0; seed < 30; ++seed) {
      const double x = reduce_reference(s, v, ar, {seed});
      CHECK(same_bits(x, reduce_reference(s, v, ar, {seed})));
      distinct.insert(std::bit_cast<uint64_t>(x));
    }
    INFO(text);
    CHECK(distinct.size() >= 2);
  }
}

TEST_CASE("binned is close to exact: within a few ulps of the correctly rounded sum on well-conditioned data") {
  Arithmetic ar;
  const auto v = generate("uniform:5000", 8);
  const double exact = reduce_reference(parse_schedule("exact"), v, ar);
  const double binned = reduce_reference(parse_schedule("binned"), v, ar);
  CHECK(std::fabs(binned - exact) <= 4 * fp::fp32().ulp(exact));
}

TEST_CASE("binned keeps its accuracy for 10^6 terms in fp32 and fp16 (bins are binary64): within 2 ulps of exact") {
  for (auto f : {fp::fp32(), fp::fp16()}) {
    Arithmetic ar;
    ar.format = f;
    auto v = generate("normal:1000000", 12);
    for (auto& x : v) x = fp::round_double(x * (f == fp::fp16() ? 0.01 : 1.0), f, {}).value;
    const double exact = reduce_reference(parse_schedule("exact"), v, ar);
    const double binned = reduce_reference(parse_schedule("binned"), v, ar);
    INFO(f.name << " exact " << exact << " binned " << binned);
    CHECK(std::fabs(binned - exact) <= 2 * f.ulp(exact));
  }
}
