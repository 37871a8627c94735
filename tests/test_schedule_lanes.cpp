// The stages that name real kernels' lanes — perm(...), body(M)[...] and "@FORMAT" — against an
// independent, straightforward evaluator written here: it cuts groups, permutes blocks and splits
// bodies with its own loops and reduces each group as a one-stage schedule `all:R` of the
// reference (trusted for the grammar without these stages by test_reference_orders), then holds
// the reference evaluator, the engine and the tree drawer to it. OpenBLAS's sdot is also written
// out as its C code does it (float FMAs, a double tail) and held to the openblas-sdot preset.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "fp/round.hpp"
#include "sim/addition_tree.hpp"
#include "sim/engine.hpp"
#include "sim/reference_evaluator.hpp"
#include "sim/schedule.hpp"
#include "tests/random_perm.hpp"
#include "tests/arithmetic_of.hpp"
#include "tests/same_bits.hpp"

using namespace fplab;
using namespace fplab::sim;
using fplab::test::arithmetic_of;
using fplab::test::same_bits;

namespace {

// Deterministic reducers whose one-stage schedule `all:R` the independent evaluator reuses
// (atomic draws per stage id, which only the walk knows; it is covered by test_engine_vs_reference).
const char* const kReducers[] = {"seq",   "rev",      "tree",  "shfl_down", "shfl_up",        "shfl_xor",   "ring",
                                 "kahan", "neumaier", "exact", "binned",    "numpy_pairwise", "fused(4,23)"};

std::vector<std::vector<double>> naive_groups(const Grouping& g, const std::vector<double>& list) {
  const size_t n = list.size(), size = static_cast<size_t>(g.size);
  std::vector<std::vector<double>> out;
  switch (g.kind) {
    case Grouping::Kind::all:
      out.push_back(list);
      break;
    case Grouping::Kind::contig:
      for (size_t i = 0; i < n; ++i) {
        if (i % size == 0) out.emplace_back();
        out.back().push_back(list[i]);
      }
      break;
    case Grouping::Kind::strided:
      out.resize(std::min(size, n));
      for (size_t i = 0; i < n; ++i) out[i % size].push_back(list[i]);
      break;
    case Grouping::Kind::split: {
      const size_t chunk = (n + size - 1) / size;
      for (size_t i = 0; i < n; ++i) {
        if (i % chunk == 0) out.emplace_back();
        out.back().push_back(list[i]);
      }
      break;
    }
  }
  return out;
}

// The stages' meaning, read straight off docs/schedules.md.
std::vector<double> naive_stages(const std::vector<Stage>& stages, std::vector<double> list, const Arithmetic& base,
                                 const NoiseKey& key) {
  for (const Stage& st : stages) {
    if (list.empty()) break;
    if (!st.perm.empty()) {  // block b's position k takes item b*L + perm[k], where there is one
      std::vector<double> next;
      const size_t lanes = st.perm.size();
      for (size_t block = 0; block * lanes < list.size(); ++block)
        for (int64_t k : st.perm)
          if (block * lanes + static_cast<size_t>(k) < list.size()) next.push_back(list[block * lanes + k]);
      list = next;
    } else if (st.body > 0) {  // the rest first, then what the body's stages leave
      const size_t body = list.size() / static_cast<size_t>(st.body) * static_cast<size_t>(st.body);
      const auto inner = naive_stages(st.inner, {list.begin(), list.begin() + body}, base, key);
      std::vector<double> next(list.begin() + body, list.end());
      next.insert(next.end(), inner.begin(), inner.end());
      list = next;
    } else if (st.each > 0) {  // every run of S on its own, their results run after run
      std::vector<double> next;
      for (size_t from = 0; from < list.size(); from += static_cast<size_t>(st.each)) {
        const size_t to = std::min(list.size(), from + static_cast<size_t>(st.each));
        const auto inner = naive_stages(st.inner, {list.begin() + from, list.begin() + to}, base, key);
        next.insert(next.end(), inner.begin(), inner.end());
      }
      list = next;
    } else {
      Arithmetic ar = base;
      if (st.format) ar.format = *st.format;
      Schedule one;
      one.stages.push_back(st);
      one.stages[0].grouping = {Grouping::Kind::all, 0};
      one.stages[0].format.reset();
      std::vector<double> next;
      for (const auto& group : naive_groups(st.grouping, list))  // held in the stage's format
        next.push_back(fp::round_double(reduce_reference(one, group, ar, key), ar.format, {ar.mode}).value);
      list = next;
    }
  }
  return list;
}

double naive_reduce(const Schedule& s, const std::vector<double>& values, const Arithmetic& ar, const NoiseKey& key) {
  const auto left = naive_stages(s.stages, values, ar, key);
  REQUIRE(left.size() <= 1);
  return left.empty() ? 0.0 : fp::round_double(left[0], ar.format, {ar.mode}).value;
}

std::vector<Stage> random_lane_stages(std::mt19937_64& g, int depth, bool end_with_all) {
  std::vector<Stage> out(1 + g() % 4);
  for (Stage& st : out) {
    switch (g() % 6) {
      case 0:
        st.perm = fplab::test::random_perm(g, 9);
        break;
      case 5:
        if (depth < 2) {  // runs of 1..12, two deep at most (the reducers here are deterministic)
          st.each = 1 + static_cast<int64_t>(g() % 12);
          st.inner = random_lane_stages(g, depth + 1, false);
          break;
        }
        [[fallthrough]];
      case 1:
        if (depth < 2) {  // bodies two deep at most
          st.body = 1 + static_cast<int64_t>(g() % 24);
          st.inner = random_lane_stages(g, depth + 1, false);
          break;
        }
        [[fallthrough]];
      default:  // contig, strided or split of 1..9, any deterministic reducer, half of them @FORMAT
        st.grouping = {static_cast<Grouping::Kind>(g() % 3), 1 + static_cast<int64_t>(g() % 9)};
        st.reducer = parse_schedule(std::string("all:") + kReducers[g() % std::size(kReducers)]).stages[0].reducer;
        if (g() % 2) st.format = std::array{fp::fp64(), fp::fp32(), fp::bf16(), fp::fp16()}[g() % 4];
    }
  }
  if (end_with_all) {
    Stage last;
    last.reducer = parse_schedule(std::string("all:") + kReducers[g() % std::size(kReducers)]).stages[0].reducer;
    if (g() % 2) last.format = fp::fp64();
    out.push_back(last);
  }
  return out;
}

std::vector<double> data_in(const fp::Format& f, size_t n, std::mt19937_64& g) {
  std::normal_distribution<double> d;
  std::vector<double> v(n);
  for (auto& x : v) x = fp::round_double(d(g) * std::exp2(std::floor(d(g) * 3)), f, {}).value;
  return v;
}

}  // namespace

TEST_CASE(
    "perm, body and @FORMAT: reference == engine == an independent evaluator, random schedules x reducers x "
    "fp32/fp64/bf16/e4m3 x rne/rz") {
  std::mt19937_64 g(19);
  const Arithmetic arithmetics[] = {arithmetic_of(fp::fp32(), fp::Mode::rne), arithmetic_of(fp::fp64(), fp::Mode::rne),
                                    arithmetic_of(fp::bf16(), fp::Mode::rne), arithmetic_of(fp::fp32(), fp::Mode::rz),
                                    arithmetic_of(fp::e4m3(), fp::Mode::rne)};
  size_t checked = 0;
  for (int i = 0; i < 400; ++i) {
    const Schedule s{random_lane_stages(g, 0, true)};
    for (const auto& ar : arithmetics) {
      for (size_t k : {1, 2, 5, 8, 13, 31, 64, 100}) {
        const auto v = data_in(ar.format, k, g);
        const NoiseKey key{g() % 100, 1, 2, g() % 7, 0};
        const double naive = naive_reduce(s, v, ar, key);
        INFO(to_string(s) << " " << ar.to_string() << " K=" << k);
        REQUIRE(same_bits(reduce_reference(s, v, ar, key), naive));
        REQUIRE(same_bits(reduce(s, v, ar, key), naive));
        ++checked;
      }
    }
  }
  CHECK(checked == 400 * 5 * 8);
}

TEST_CASE("perm, body and @FORMAT: addition trees (fplab tree, reveal's match) as worked out by hand") {
  // A last, shorter block keeps the lanes it has; a body's rest comes first, its results after.
  CHECK(schedule_addition_tree(parse_schedule("perm(1,0,3,2) | contig(2):seq | all:seq"), 5).text() ==
        "(((0+1)+(2+3))+4)");
  CHECK(schedule_addition_tree(parse_schedule("perm(2,0,1) | all:seq"), 5).text() == "((((0+2)+1)+3)+4)");
  // cols(R): rows of R read column by column, a last short row lacking the columns past its end
  CHECK(schedule_addition_tree(parse_schedule("cols(3) | all:seq"), 7).text() == "((((((0+3)+6)+1)+4)+2)+5)");
  CHECK(schedule_addition_tree(parse_schedule("cols(3) | contig(2):seq | all:seq"), 6).text() ==
        "(((0+3)+(1+4))+(2+5))");
  CHECK(schedule_addition_tree(parse_schedule("cols(9) | all:seq"), 4).text() == "(((0+1)+2)+3)");
  CHECK(schedule_addition_tree(parse_schedule("body(4)[strided(2):seq] | all:seq"), 7).text() ==
        "(((0+2)+((4+5)+6))+(1+3))");
  CHECK(schedule_addition_tree(parse_schedule("body(4)[all:tree] | all:seq@fp64"), 3).text() == "((0+1)+2)");
}

TEST_CASE("@FORMAT on products: float products into a double accumulator, as C's float * float") {
  // a*b rounded to float, summed in double, rounded to float once at the end.
  std::mt19937_64 g(5);
  std::normal_distribution<float> d;
  for (size_t n : {1, 2, 3, 17, 100}) {
    std::vector<double> a(n), b(n);
    double acc = 0;
    for (size_t i = 0; i < n; ++i) {
      const float x = d(g), y = d(g);
      a[i] = x, b[i] = y;
      acc += static_cast<double>(x * y);
    }
    const Arithmetic ar;  // fp32, products fused: a product meeting a double stage is rounded first
    INFO("n = " << n);
    CHECK(same_bits(dot_reference(parse_schedule("all:seq@fp64"), a, b, ar), static_cast<float>(acc)));
    // fused into a float chain, the same products give the FMA chain instead
    float chain = static_cast<float>(a[0]) * static_cast<float>(b[0]);
    for (size_t i = 1; i < n; ++i) chain = std::fma(static_cast<float>(a[i]), static_cast<float>(b[i]), chain);
    CHECK(same_bits(dot_reference(parse_schedule("all:seq"), a, b, ar), chain));
  }
}

namespace {

// OpenBLAS 0.3.21's sdot (kernel/x86_64/sdot.c, sdot_microk_skylakex-2.c) for unit strides,
// written as its C does it, lane by lane.
float openblas_sdot(const std::vector<float>& x, const std::vector<float>& y) {
  const size_t n = x.size(), n1 = n & ~size_t{31}, n64 = n1 & ~size_t{63};
  float acc[4][8] = {};  // the four 256-bit accumulators
  if (n64 > 0) {
    float acc512[4][16] = {};
    for (size_t i = 0; i < n64; i += 64)
      for (size_t q = 0; q < 4; ++q)
        for (size_t l = 0; l < 16; ++l) acc512[q][l] = std::fma(x[i + 16 * q + l], y[i + 16 * q + l], acc512[q][l]);
    for (size_t q = 0; q < 4; ++q)
      for (size_t j = 0; j < 8; ++j) acc[q][j] = acc512[q][j] + acc512[q][j + 8];
  }
  for (size_t i = n64; i < n1; i += 32)
    for (size_t q = 0; q < 4; ++q)
      for (size_t j = 0; j < 8; ++j) acc[q][j] = std::fma(x[i + 8 * q + j], y[i + 8 * q + j], acc[q][j]);
  float v[8], h[4];
  for (size_t j = 0; j < 8; ++j) v[j] = ((acc[0][j] + acc[1][j]) + acc[2][j]) + acc[3][j];
  for (size_t j = 0; j < 4; ++j) h[j] = v[j] + v[j + 4];           // the 128-bit halves
  const float kernel = n1 ? (h[0] + h[1]) + (h[2] + h[3]) : 0.0f;  // two hadds
  double dot = 0.0;
  for (size_t i = n1; i < n; ++i) dot += static_cast<double>(y[i] * x[i]);
  dot += kernel;
  return static_cast<float>(dot);
}

// The same sdot.c with sdot_microk_haswell-2.c (OpenBLAS's Haswell and Zen cores), lane by lane:
// four 8-lane FMA registers over 32 terms at a time, each register's 128-bit halves added, the
// registers added (r0 + r1) + (r2 + r3), two hadds.
float openblas_sdot_haswell(const std::vector<float>& x, const std::vector<float>& y) {
  const size_t n = x.size(), n1 = n & ~size_t{31};
  float acc[4][8] = {};
  for (size_t i = 0; i < n1; i += 32)
    for (size_t q = 0; q < 4; ++q)
      for (size_t j = 0; j < 8; ++j) acc[q][j] = std::fma(x[i + 8 * q + j], y[i + 8 * q + j], acc[q][j]);
  float half[4][4], v[4];
  for (size_t q = 0; q < 4; ++q)
    for (size_t e = 0; e < 4; ++e) half[q][e] = acc[q][e] + acc[q][e + 4];  // vextractf128, vaddps
  for (size_t e = 0; e < 4; ++e) v[e] = (half[0][e] + half[1][e]) + (half[2][e] + half[3][e]);
  const float kernel = n1 ? (v[0] + v[1]) + (v[2] + v[3]) : 0.0f;  // two hadds
  double dot = 0.0;
  for (size_t i = n1; i < n; ++i) dot += static_cast<double>(y[i] * x[i]);
  dot += kernel;
  return static_cast<float>(dot);
}

}  // namespace

namespace {

using SdotInC = float (*)(const std::vector<float>&, const std::vector<float>&);

// The preset against its kernel written out in C, reference and engine, every n to 300 and a few
// long vectors; returns how many of those inputs `other` (another kernel) gives other bits on.
size_t check_sdot_preset(const char* preset, SdotInC kernel, SdotInC other, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d;
  const Schedule sdot = parse_schedule(preset);
  const Arithmetic ar;
  std::vector<size_t> sizes(300);
  std::iota(sizes.begin(), sizes.end(), 1);
  for (size_t n : {1000, 1023, 4096, 5000}) sizes.push_back(n);
  size_t differs = 0;
  for (size_t n : sizes) {
    std::vector<float> x(n), y(n);
    std::vector<double> a(n), b(n);
    for (size_t i = 0; i < n; ++i) x[i] = d(g) * std::exp2(std::floor(2 * d(g))), y[i] = d(g), a[i] = x[i], b[i] = y[i];
    const double want = kernel(x, y);
    INFO(preset << ", n = " << n);
    REQUIRE(same_bits(dot_reference(sdot, a, b, ar), want));
    std::vector<float> c(1);
    gemm(sdot, x.data(), y.data(), c.data(), {1, 1, n}, ar);
    REQUIRE(same_bits(c[0], want));
    differs += !same_bits(other(x, y), want);
  }
  return differs;
}

}  // namespace

TEST_CASE("openblas-sdot and openblas-sdot-haswell == OpenBLAS's two sdot kernels written out in C") {
  // The two kernels are told apart by these inputs: each preset is held to its own kernel.
  CHECK(check_sdot_preset("openblas-sdot", openblas_sdot, openblas_sdot_haswell, 3) > 75);
  CHECK(check_sdot_preset("openblas-sdot-haswell", openblas_sdot_haswell, openblas_sdot, 4) > 75);
}

TEST_CASE("each(784)[contig(512):seq] | all:seq == cuDNN's weight-gradient tiles written out, reference and GEMM") {
  // Per image of 28 x 28 positions, one FMA chain over positions 0..511 and one over 512..783
  // (docs/results/reveal_torch.md: wgrad_alg0_engine's tiles of 512 pixels); the parts in order.
  const Schedule tiles = parse_schedule("each(784)[contig(512):seq] | all:seq");
  std::mt19937_64 g(23);
  std::normal_distribution<float> d;
  const Arithmetic ar;
  for (size_t k : {size_t{300}, size_t{784}, size_t{3 * 784}, size_t{3 * 784 + 600}}) {
    const size_t m = 3, n = 2;
    std::vector<float> a(m * k), b(k * n), c(m * n);
    for (auto& v : a) v = d(g) * std::exp2(std::floor(2 * d(g)));
    for (auto& v : b) v = d(g);
    gemm(tiles, a.data(), b.data(), c.data(), {m, n, k}, ar);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) {
        float sum = 0.0f;
        bool first_part = true;
        std::vector<double> x(k), y(k);
        for (size_t image = 0; image < k; image += 784)
          for (size_t from = image; from < std::min(k, image + 784); from += 512) {
            const size_t to = std::min({k, image + 784, from + 512});
            float chain = a[i * k + from] * b[from * n + j];
            for (size_t t = from + 1; t < to; ++t) chain = std::fma(a[i * k + t], b[t * n + j], chain);
            sum = first_part ? chain : sum + chain;
            first_part = false;
          }
        for (size_t t = 0; t < k; ++t) x[t] = a[i * k + t], y[t] = b[t * n + j];
        INFO("K = " << k << ", output " << i << "," << j);
        CHECK(same_bits(dot_reference(tiles, x, y, ar), sum));
        CHECK(same_bits(c[i * n + j], sum));
      }
  }
  CHECK(schedule_addition_tree(parse_schedule("each(5)[contig(3):seq] | all:seq"), 12).text() ==
        "((((((0+1)+2)+(3+4))+((5+6)+7))+(8+9))+(10+11))");
}

namespace {

// The slices added in fp32 in the order cols(R) reads them: rows of R, column by column (R = P - 1:
// slice 0, then P - 1 from the second row, then 1, 2, ...).
float fold_columns(const std::vector<float>& slice, size_t row) {
  std::vector<size_t> fold;
  for (size_t col = 0; col < std::min(row, slice.size()); ++col)
    for (size_t at = col; at < slice.size(); at += row) fold.push_back(at);
  float sum = slice[fold[0]];
  for (size_t f = 1; f < fold.size(); ++f) sum += slice[fold[f]];
  return sum;
}

}  // namespace

TEST_CASE("deal(P,B)[...] | cols(R) | all:seq == split-K slices of dealt tiles written out, reference and GEMM") {
  // Tiles of B terms dealt to P slices in turn (tile t to slice t mod P), every slice one FMA chain
  // over its tiles in order, the slices then added in the order cols(P - 1) reads them: 0, P - 1,
  // 1, 2, ..., P - 2 (the fold cuDNN's TF32 weight gradient at 14 x 14 showed: docs/results/reveal_torch.md).
  std::mt19937_64 g(29);
  std::normal_distribution<float> d;
  const Arithmetic ar;
  for (const auto& [hands, block] : {std::pair<size_t, size_t>{4, 8}, {3, 5}, {7, 16}, {5, 1}})
    for (size_t k : {size_t{1}, size_t{7}, size_t{40}, size_t{37}, size_t{3 * 8 * 4 + 3}, size_t{501}}) {
      const Schedule dealt =
          parse_schedule("deal(" + std::to_string(hands) + "," + std::to_string(block) + ")[all:seq] | cols(" +
                         std::to_string(hands - 1 ? hands - 1 : 1) + ") | all:seq");
      const size_t m = 3, n = 2;
      std::vector<float> a(m * k), b(k * n), c(m * n);
      for (auto& v : a) v = d(g) * std::exp2(std::floor(2 * d(g)));
      for (auto& v : b) v = d(g);
      gemm(dealt, a.data(), b.data(), c.data(), {m, n, k}, ar);
      const size_t tiles = (k + block - 1) / block, used = std::min(hands, tiles);
      for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
          std::vector<float> slice(used);
          for (size_t s = 0; s < used; ++s) {
            bool first = true;
            for (size_t t = s; t < tiles; t += hands)
              for (size_t at = t * block; at < std::min(k, t * block + block); ++at) {
                slice[s] = first ? a[i * k + at] * b[at * n + j] : std::fma(a[i * k + at], b[at * n + j], slice[s]);
                first = false;
              }
          }
          const float sum = fold_columns(slice, hands - 1 ? hands - 1 : 1);
          std::vector<double> x(k), y(k);
          for (size_t t = 0; t < k; ++t) x[t] = a[i * k + t], y[t] = b[t * n + j];
          INFO(to_string(dealt) << " over K = " << k << ", output " << i << "," << j);
          CHECK(same_bits(dot_reference(dealt, x, y, ar), sum));
          CHECK(same_bits(c[i * n + j], sum));
        }
    }
  CHECK(schedule_addition_tree(parse_schedule("deal(2,2)[all:seq] | all:seq"), 7).text() ==
        "((((0+1)+4)+5)+((2+3)+6))");
}

TEST_CASE("deal(P,B)[all:fused(...)]: every slice the tensor-core chain of its tiles gathered, GEMM and reference") {
  // The GEMM's path for a fused first stage against chains computed on each slice's gathered terms.
  std::mt19937_64 g(31);
  std::normal_distribution<float> d;
  const Arithmetic ar;
  const Schedule dealt = parse_schedule("deal(5,16)[all:fused(8,25,tf32rna)] | cols(4) | all:seq");
  const Schedule chain = parse_schedule("all:fused(8,25,tf32rna)");
  for (size_t k : {size_t{9}, size_t{16 * 5}, size_t{16 * 13 + 5}, size_t{1000}}) {
    const size_t m = 4, n = 3;
    std::vector<float> a(m * k), b(k * n), c(m * n);
    for (auto& v : a) v = d(g);
    for (auto& v : b) v = d(g);
    gemm(dealt, a.data(), b.data(), c.data(), {m, n, k}, ar);
    const size_t tiles = (k + 15) / 16, used = std::min<size_t>(5, tiles);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) {
        std::vector<float> slice(used);
        for (size_t s = 0; s < used; ++s) {
          std::vector<double> x, y;
          for (size_t t = s; t < tiles; t += 5)
            for (size_t at = t * 16; at < std::min(k, t * 16 + 16); ++at)
              x.push_back(a[i * k + at]), y.push_back(b[at * n + j]);
          slice[s] = static_cast<float>(dot_reference(chain, x, y, ar));
        }
        const float sum = fold_columns(slice, 4);
        std::vector<double> x(k), y(k);
        for (size_t t = 0; t < k; ++t) x[t] = a[i * k + t], y[t] = b[t * n + j];
        INFO("K = " << k << ", output " << i << "," << j);
        CHECK(same_bits(dot_reference(dealt, x, y, ar), sum));
        CHECK(same_bits(c[i * n + j], sum));
      }
  }
}
