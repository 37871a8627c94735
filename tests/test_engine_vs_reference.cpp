// The fast engine against the reference evaluator, bit for bit: every reducer and preset, random
// shapes (K from 1 up, non-powers of two, K smaller than the groups), several formats and modes,
// batches split into noise tiles, and GEMM against one reference dot product per output.
#include <catch2/catch.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <random>

#include "fp/round.hpp"
#include "fp/superaccumulator.hpp"
#include "sim/engine.hpp"
#include "sim/exact_gemm.hpp"
#include "sim/generate.hpp"
#include "sim/narrow_chain_tile.hpp"
#include "sim/presets.hpp"
#include "sim/reference_evaluator.hpp"
#include "tests/arithmetic_of.hpp"
#include "tests/same_bits.hpp"

using namespace fplab;
using namespace fplab::sim;
using fplab::test::arithmetic_of;
using fplab::test::same_bits;

namespace {

// Seeded data of a format: a mix of magnitudes and signs, with exact cancellations.
std::vector<double> data_in(const fp::Format& f, size_t n, std::mt19937_64& g) {
  std::normal_distribution<double> d;
  std::vector<double> v(n);
  for (auto& x : v) {
    x = d(g) * std::exp2(std::floor(d(g) * 3));
    if (g() % 8 == 0 && &x != &v[0]) x = -*(&x - 1);
    x = fp::round_double(x, f, {}).value;
  }
  return v;
}

std::vector<std::string> schedules_under_test() {
  std::vector<std::string> s = {"all:seq",
                                "all:rev",
                                "all:tree",
                                "all:shfl_down",
                                "all:shfl_up",
                                "all:shfl_xor",
                                "all:atomic",
                                "all:ring",
                                "all:kahan",
                                "all:neumaier",
                                "all:exact",
                                "all:binned",
                                "all:numpy_pairwise",
                                "all:fused(4,23)",
                                "all:fused(8,30)",
                                "strided(32):seq | all:shfl_down",
                                "contig(32):shfl_down | contig(3):rev | all:tree",
                                "strided(7):tree | shuffle | all:seq",
                                "split(5):kahan | all:atomic",
                                "contig(16):exact | all:binned",
                                "shuffle | contig(4):shfl_up | strided(3):numpy_pairwise | all:neumaier",
                                "perm(3,1,0,2) | contig(4):tree | all:seq",
                                // cuDNN's NHWC 3 x 3 kernels: (kernel position, channel) order, taps
                                // reversed for the input gradient
                                "cols(9) | all:fused(8,25,tf32rne)",
                                "perm(8,7,6,5,4,3,2,1,0) | cols(9) | all:seq",
                                "cols(4) | contig(8):seq | all:atomic",
                                "each(36)[cols(9)] | all:fused(8,25,tf32rne)",
                                "each(18)[perm(8,7,6,5,4,3,2,1,0) | cols(9)] | contig(4):seq | all:seq",
                                "body(8)[strided(4):seq | perm(1,0,3,2) | all:tree] | all:seq@fp64",
                                "contig(4):kahan@fp64 | strided(2):tree@bf16 | all:fused(4,23)",
                                "body(3)[shuffle | contig(2):shfl_up] | strided(2):numpy_pairwise@fp16 | all:atomic",
                                "body(16)[body(32)[strided(32):exact@fp64] | all:binned] | all:rev",
                                "contig(5):seq@fp32>bf16 | strided(3):rev@fp64>fp16 | all:ring@fp32>fp16",
                                "body(3)[contig(4):atomic@fp64>e5m2] | strided(2):shfl_down@fp32>bf16 | "
                                "contig(3):numpy_pairwise@fp64>fp32 | all:tree@fp32>fp16"};
  for (const auto& p : presets()) {
    std::string small = p.example;  // keep the group counts small enough for short K
    if (small == "cuda-naive-sum(256,1024)") small = "cuda-naive-sum(64,2)";
    if (small == "cub-sum(256,1024)") small = "cub-sum(64,2)";
    if (small == "torch-sum(512,512)") small = "torch-sum(32,2)";
    s.push_back(small);
  }
  return s;
}

}  // namespace

TEST_CASE(
    "engine reduce_batch == reference, every reducer and preset x K in 1..1000 x fp32/fp64/bf16/e4m3 x rne/rz/sr") {
  std::mt19937_64 g(7);
  const std::vector<size_t> ks = {1, 2, 3, 7, 8, 31, 32, 33, 64, 100, 127, 128, 129, 257, 1000};
  struct Ar {
    fp::Format f;
    fp::Mode m;
  };
  const Ar arithmetics[] = {{fp::fp32(), fp::Mode::rne}, {fp::fp64(), fp::Mode::rne}, {fp::bf16(), fp::Mode::rne},
                            {fp::fp32(), fp::Mode::rz},  {fp::e4m3(), fp::Mode::rne}, {fp::fp16(), fp::Mode::sr}};
  for (const auto& text : schedules_under_test()) {
    const Schedule s = parse_schedule(text);
    for (const auto& ar : arithmetics) {
      if (s.stages.back().reducer.kind == Reducer::Kind::fused && ar.m == fp::Mode::sr) continue;  // not a TC mode
      Arithmetic arithmetic;
      arithmetic.format = ar.f;
      arithmetic.mode = ar.m;
      for (size_t k : ks) {
        const size_t outputs = 5, tile = 2;
        const auto terms = data_in(ar.f, k * outputs, g);
        const NoiseKey key{g() % 1000, 3, 4, 0, 0};
        std::vector<double> out(outputs);
        reduce_batch(s, terms.data(), k, outputs, arithmetic, key, out.data(), tile);
        for (size_t m = 0; m < outputs; ++m) {
          std::vector<double> column(k);
          for (size_t t = 0; t < k; ++t) column[t] = terms[t * outputs + m];
          const double expected = reduce_reference(s, column, arithmetic, batch_output_key(key, m, tile));
          INFO(text << " " << arithmetic.to_string() << " K=" << k << " output " << m);
          REQUIRE(same_bits(out[m], expected));
        }
      }
    }
  }
}

TEST_CASE("a compensated group of one term is that term, -0 included, as the reference's") {
  // Kahan's and Neumaier's last step adds the compensation (+0) to the sum: a lone -0 would
  // become +0 if the group ran at all; a group of one returns its member, as for every reducer.
  for (const char* text : {"contig(1):kahan | all:seq", "contig(1):neumaier | all:seq", "all:neumaier", "all:kahan"})
    for (auto f : {fp::fp32(), fp::fp64(), fp::bf16()}) {
      Arithmetic arithmetic;
      arithmetic.format = f;
      const Schedule s = parse_schedule(text);
      for (const std::vector<double>& v : {std::vector<double>{-0.0}, {-0.0, -0.0}, {1.5}}) {
        INFO(text << " " << f.name << " on " << v.size() << " terms");
        const double expected = reduce_reference(s, v, arithmetic);
        CHECK(same_bits(reduce(s, v, arithmetic), expected));
        if (v.size() == 1) CHECK(same_bits(expected, v[0]));
      }
    }
}

TEST_CASE("engine reduce == reference on long reductions: K = 10^5 (and 10^4 for the slow generic path)") {
  std::mt19937_64 g(11);
  for (const char* text : {"strided(33792):seq | contig(32):shfl_down | contig(8):seq | all:atomic", "numpy",
                           "numpy-2.2", "splitk(7)", "systolic(128)", "strided(32):seq | all:shfl_down"}) {
    for (auto f : {fp::fp32(), fp::bf16()}) {
      Arithmetic arithmetic;
      arithmetic.format = f;
      const size_t k = f == fp::fp32() ? 100000 : 10000;
      const auto v = data_in(f, k, g);
      const Schedule s = parse_schedule(text);
      INFO(text << " " << f.name);
      REQUIRE(same_bits(reduce(s, v, arithmetic, {9}), reduce_reference(s, v, arithmetic, {9})));
    }
  }
}

TEST_CASE(
    "engine gemm == reference dot per output: fused FMA chains, rounded products, product terms; awkward shapes") {
  std::mt19937_64 g(13);
  std::normal_distribution<float> d;
  const char* schedules[] = {
      "all:seq",           "all:exact",        "shuffle | all:exact",      "strided(32):seq | all:shfl_down",
      "splitk(4)",         "splitk-atomic(3)", "contig(5):seq | all:tree", "systolic(16)",
      "shuffle | all:seq", "all:fused(8,24)",
      // runs that restart every S terms (cuDNN's weight gradient per image), chains in them
      "each(40)[contig(16):seq] | all:seq", "each(30)[strided(4):seq] | all:atomic",
      "each(50)[contig(64):seq] | all:tree", "each(7)[contig(3):seq] | contig(5):seq | all:shfl_down",
      "each(20)[contig(8):tree] | all:seq",
      // an NHWC convolution's terms by kernel position: a GEMM on reordered operands (deterministic)
      // or through the product walk (atomic)
      "cols(9) | all:fused(8,25,tf32rne)", "each(36)[perm(8,7,6,5,4,3,2,1,0) | cols(9)] | all:seq",
      "cols(9) | all:kahan", "cols(5) | contig(7):seq | all:atomic", "perm(2,0,1) | contig(4):seq | all:tree",
      // one chain per kernel position (cuDNN's input gradient at 8x8): gathered where P divides K
      "strided(11):seq | all:atomic", "strided(3):seq | all:seq", "strided(4):seq | contig(2):atomic | all:tree"};
  const struct { size_t m, n, k; } shapes[] = {{1, 1, 1}, {4, 64, 33}, {5, 70, 31}, {9, 130, 100}, {3, 7, 257}};
  for (const char* text : schedules) {
    const Schedule s = parse_schedule(text);
    for (auto products : {Products::fused, Products::rounded, Products::exact}) {
      for (const auto& sh : shapes) {
        std::vector<float> a(sh.m * sh.k), b(sh.k * sh.n), c(sh.m * sh.n);
        for (auto& x : a) x = d(g);
        for (auto& x : b) x = d(g) * std::exp2(static_cast<float>(g() % 8));
        Arithmetic arithmetic;
        arithmetic.products = products;
        const NoiseKey key{5, 1, 2};
        gemm(s, a.data(), b.data(), c.data(), {sh.m, sh.n, sh.k}, arithmetic, key);
        for (size_t i = 0; i < sh.m; ++i)
          for (size_t j = 0; j < sh.n; j += (sh.n > 20 ? 7 : 1)) {
            std::vector<double> row(sh.k), col(sh.k);
            for (size_t t = 0; t < sh.k; ++t) {
              row[t] = a[i * sh.k + t];
              col[t] = b[t * sh.n + j];
            }
            const double expected = dot_reference(s, row, col, arithmetic, gemm_output_key(key, i, j, sh.n));
            INFO(text << " products=" << products_name(products) << " shape " << sh.m << "x" << sh.n << "x" << sh.k
                      << " output (" << i << "," << j << ")");
            REQUIRE(same_bits(c[i * sh.n + j], expected));
          }
      }
    }
  }
}

TEST_CASE(
    "engine exact gemm == exact reference per output: wide ranges, zeros, subnormals, cancellation, inf/NaN, formats, "
    "sr") {
  std::mt19937_64 g(17);
  std::normal_distribution<float> d;
  const Schedule exact = parse_schedule("exact");
  enum Data { normal, lognormal, zero_lines, subnormal, cancelling, special, midpoints };
  for (int data = normal; data <= midpoints; ++data) {
    for (auto [format, mode] : {std::pair{fp::fp32(), fp::Mode::rne},
                                {fp::bf16(), fp::Mode::rd},
                                {fp::e4m3(), fp::Mode::rne},
                                {fp::fp32(), fp::Mode::sr},
                                {fp::fp16(), fp::Mode::ro}}) {
      const size_t m = 6, n = 35, k = data == cancelling ? 64 : data == midpoints ? 2 : 300;
      std::vector<float> a(m * k), b(k * n), c(m * n);
      for (auto& x : a) x = d(g) * (data == lognormal ? std::exp2(std::round(d(g) * 12)) : 1.0f);
      for (auto& x : b) x = d(g) * (data == lognormal ? std::exp2(std::round(d(g) * 12)) : 1.0f);
      if (data == zero_lines) {
        for (size_t t = 0; t < k; ++t) a[2 * k + t] = (t % 2) ? -0.0f : 0.0f, b[t * n + 5] = 0.0f;
      }
      if (data == subnormal) {
        for (size_t x = 0; x < a.size(); x += 7) a[x] = std::ldexp(a[x], -140);
      }
      if (data == cancelling) {  // every row of a pairs t with -t: sums are exactly zero
        for (size_t i = 0; i < m; ++i)
          for (size_t t = 0; t < k; t += 2) a[i * k + t + 1] = a[i * k + t];
        for (size_t t = 0; t < k; t += 2)
          for (size_t j = 0; j < n; ++j) b[(t + 1) * n + j] = -b[t * n + j];
      }
      if (data == special) {
        a[3] = INFINITY;
        b[7 * n + 2] = NAN;
      }
      if (data == midpoints) {  // (1 + u)(1 + v), often an fp32 midpoint, plus 2^-60, -2^-60 or 0:
        // a sum rounded first to a double lands on the midpoint, and then ties the wrong way
        for (size_t i = 0; i < m; ++i) {
          a[i * k] = 1.0f + std::ldexp(static_cast<float>(g() % 4096), -12);
          a[i * k + 1] = std::array{0x1p-30f, -0x1p-30f, 0.0f}[i % 3];
        }
        for (size_t j = 0; j < n; ++j)
          b[j] = 1.0f + std::ldexp(static_cast<float>(g() % 4096), -12), b[n + j] = 0x1p-30f;
      }
      Arithmetic arithmetic;
      arithmetic.format = format;
      arithmetic.mode = mode;
      arithmetic.products = Products::exact;
      const NoiseKey key{3, 9, 1};
      gemm(exact, a.data(), b.data(), c.data(), {m, n, k}, arithmetic, key);
      for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
          std::vector<double> row(k), col(k);
          for (size_t t = 0; t < k; ++t) row[t] = a[i * k + t], col[t] = b[t * n + j];
          const double expected = dot_reference(exact, row, col, arithmetic, gemm_output_key(key, i, j, n));
          INFO("data " << data << " " << arithmetic.to_string() << " output (" << i << "," << j << ")");
          REQUIRE(same_bits(c[i * n + j], expected));
        }
    }
  }
}

namespace {

// exact_gemm_values against a SuperAccumulator per output: every field of the exact value.
void check_exact_values(const std::vector<float>& a, const std::vector<float>& b, size_t m, size_t n, size_t k,
                        fp::Mode mode, const std::string& what) {
  size_t checked = 0;
  exact_gemm_values(a.data(), b.data(), m, n, k, mode, [&](size_t i, size_t j, const fp::ExactValue& v) {
    fp::SuperAccumulator acc;
    for (size_t t = 0; t < k; ++t) acc.add_product(a[i * k + t], b[t * n + j]);
    const fp::ExactValue expected = acc.value(mode);
    INFO(what << " values, mode " << static_cast<int>(mode) << " output (" << i << "," << j << ")");
    REQUIRE(v.kind == expected.kind);
    REQUIRE(v.negative == expected.negative);
    REQUIRE(v.exponent == expected.exponent);
    REQUIRE(v.significand == expected.significand);
    REQUIRE(v.sticky == expected.sticky);
    ++checked;
  });
  CHECK(checked == m * n);
}

}  // namespace

TEST_CASE("exact gemm values == superaccumulator values bit for bit, where big products cancel and tiny ones remain") {
  // Each row pairs full-precision O(1) products that cancel exactly (b[t + h] = -b[t]) and
  // starts with a few tiny products: the exact sum is tiny, so any bit of a tiny product lost
  // in an intermediate rounding shows in the result's 64 significant bits.
  std::mt19937_64 g(19);
  std::normal_distribution<float> d;
  auto full = [&] { return d(g) * (1 + std::ldexp(static_cast<float>(g() % (1 << 23)), -23)); };
  for (int tiny_exponent : {-10, -30, -60, -80, -100}) {
    const size_t m = 9, n = 37, tiny = 4, h = 100, k = tiny + 2 * h;
    std::vector<float> a(m * k), b(k * n);
    for (size_t i = 0; i < m; ++i) {
      for (size_t t = 0; t < tiny; ++t) a[i * k + t] = std::ldexp(full(), tiny_exponent);
      for (size_t t = 0; t < h; ++t) a[i * k + tiny + t] = a[i * k + tiny + h + t] = full();
    }
    for (size_t j = 0; j < n; ++j) {
      for (size_t t = 0; t < tiny; ++t) b[t * n + j] = full();
      for (size_t t = 0; t < h; ++t) {
        b[(tiny + t) * n + j] = full();
        b[(tiny + h + t) * n + j] = -b[(tiny + t) * n + j];
      }
    }
    check_exact_values(a, b, m, n, k, fp::Mode::rne, "tiny products near 2^" + std::to_string(tiny_exponent));
  }
}

namespace {

// The exact GEMM with `format` and `mode` against one exact reference dot product per output, bit
// for bit (signs of zeros included), and exact_gemm_values against a SuperAccumulator per output.
void check_exact_gemm(const std::vector<float>& a, const std::vector<float>& b, size_t m, size_t n, size_t k,
                      const fp::Format& format, fp::Mode mode, const std::string& what) {
  Arithmetic arithmetic;
  arithmetic.format = format;
  arithmetic.mode = mode;
  arithmetic.products = Products::exact;
  const NoiseKey key{3, 9, 1};
  const Schedule exact = parse_schedule("exact");
  std::vector<float> c(m * n);
  gemm(exact, a.data(), b.data(), c.data(), {m, n, k}, arithmetic, key);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      std::vector<double> row(k), col(k);
      for (size_t t = 0; t < k; ++t) row[t] = a[i * k + t], col[t] = b[t * n + j];
      const double expected = dot_reference(exact, row, col, arithmetic, gemm_output_key(key, i, j, n));
      INFO(what << " " << arithmetic.to_string() << " shape " << m << "x" << n << "x" << k << " output (" << i << ","
                << j << ")");
      REQUIRE(same_bits(c[i * n + j], expected));
    }
  check_exact_values(a, b, m, n, k, mode, what);
}

// Binades from the finest grid a nonzero element of x lies on to the top of its largest (what
// decides whether the exact GEMM's two- or three-level forms hold an output); 0 for all zeros.
int span_of(const float* x, size_t n, size_t step) {
  int top = -1000, grid = 1000;
  for (size_t t = 0; t < n; ++t) {
    const float v = x[t * step];
    if (v == 0) continue;
    int exponent;
    std::frexp(v, &exponent);  // |v| < 2^exponent
    top = std::max(top, exponent);
    // The finest grid: v * 2^-g is an integer and v * 2^-(g+1) is not.
    int g = exponent - 24;
    while (std::ldexp(v, -(g + 1)) == std::trunc(std::ldexp(v, -(g + 1)))) ++g;
    grid = std::min(grid, g);
  }
  return top == -1000 ? 0 : top - grid;
}

}  // namespace

TEST_CASE(
    "exact gemm == exact reference per output: zeros signed per IEEE in every mode (rows and columns of +-0, "
    "cancellation to 0), sparse rows, every block width") {
  std::mt19937_64 g(23);
  std::normal_distribution<float> d;
  auto signed_zero = [&] { return g() % 2 ? -0.0f : 0.0f; };
  for (size_t n : {1, 9, 16, 35, 48, 80})
    for (size_t k : {1, 2, 7, 40}) {
      const size_t m = 7;
      std::vector<float> a(m * k), b(k * n);
      // Rows: 0 all -0, 1 all +0, 2 +-0 at random, 3 cancels (a[t] = a[t + 1], b[t + 1] = -b[t]),
      // the rest mostly zeros (as ReLU and max-pool gradients are).
      for (size_t i = 0; i < m; ++i)
        for (size_t t = 0; t < k; ++t) {
          float& x = a[i * k + t];
          x = i == 0 ? -0.0f : i == 1 ? 0.0f : i == 2 ? signed_zero() : g() % 3 == 0 ? d(g) : signed_zero();
        }
      for (size_t t = 0; t + 1 < k; t += 2) a[3 * k + t] = d(g), a[3 * k + t + 1] = a[3 * k + t];
      // Columns: 0 all negative, 1 all zeros of random signs, the rest normal with some zeros.
      for (size_t t = 0; t < k; ++t)
        for (size_t j = 0; j < n; ++j) {
          float& x = b[t * n + j];
          x = j == 0 ? -std::fabs(d(g)) - 0.5f : j == 1 ? signed_zero() : g() % 5 == 0 ? signed_zero() : d(g);
        }
      for (size_t t = 0; t + 1 < k; t += 2)
        for (size_t j = 0; j < n; ++j) b[(t + 1) * n + j] = -b[t * n + j];
      for (auto [format, mode] : {std::pair{fp::fp32(), fp::Mode::rne},
                                  {fp::fp32(), fp::Mode::rd},
                                  {fp::fp32(), fp::Mode::ru},
                                  {fp::bf16(), fp::Mode::rz}})
        check_exact_gemm(a, b, m, n, k, format, mode, "zeros");
    }
}

TEST_CASE(
    "exact gemm == exact reference per output: dynamic ranges for the two-level form, the three-level form and the "
    "exact dot, subnormals, long K, near-cancellation") {
  std::mt19937_64 g(29);
  std::normal_distribution<float> d;
  std::uniform_int_distribution<int> coin(0, 1);
  // A full 24-bit significand of magnitude about 2^-shift (random low bits keep the grids fine).
  auto full = [&](int shift) {
    return std::ldexp(d(g) * (1 + std::ldexp(static_cast<float>(g() % (1 << 23)), -23)), -shift);
  };
  for (size_t k : {3, 300, 3000}) {
    const size_t m = 6, n = 35;
    const int log_k = static_cast<int>(std::bit_width(k));
    std::vector<float> a(m * k), b(k * n);
    // Row i spans about 20 * i binades (row 5 reaches fp32's subnormals); column j about 3 * j.
    for (size_t i = 0; i < m; ++i)
      for (size_t t = 0; t < k; ++t)
        a[i * k + t] = g() % 4 == 0 ? 0.0f : full(static_cast<int>(g() % (20 * i + 1)) + (i == 5 ? 40 : 0));
    for (size_t t = 0; t < k; ++t)
      for (size_t j = 0; j < n; ++j) b[t * n + j] = full(static_cast<int>(g() % (3 * j + 1)));
    // Near-cancellation in row 4: its second half repeats the first with one column's signs
    // flipped, so that output's big products cancel and its smallest decide the sum.
    for (size_t t = 0; t < k / 2; ++t) {
      a[4 * k + k / 2 + t] = a[4 * k + t];
      b[(k / 2 + t) * n + 20] = coin(g) ? -b[t * n + 20] : b[(k / 2 + t) * n + 20];
    }
    // The data must reach every form: spans below 103 - 2L (two levels), below 154 - 3L (three) and above.
    int forms[3] = {0, 0, 0};
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) {
        const int span = span_of(&a[i * k], k, 1) + span_of(&b[j], k, n);
        ++forms[span < 103 - 2 * log_k ? 0 : span < 154 - 3 * log_k ? 1 : 2];
      }
    if (k > 3) {
      CHECK(forms[0] > 0);
      CHECK(forms[1] > 0);
      CHECK(forms[2] > 0);
    }
    for (auto [format, mode] : {std::pair{fp::fp32(), fp::Mode::rne},
                                {fp::fp32(), fp::Mode::rd},
                                {fp::fp16(), fp::Mode::ro},
                                {fp::bf16(), fp::Mode::rne}})
      check_exact_gemm(a, b, m, n, k, format, mode, "ranges");
  }
}

TEST_CASE("exact gemm == exact reference per output: fp32 midpoints decided by a product 2^-60 below, three levels") {
  // (1 + x)(1 + y) with x, y on the grid 2^-12 is often an fp32 midpoint; a product near +-2^-60
  // (or none) decides the tie. Its fine grid puts the outputs in the three-level form for k = 1000
  // (the other terms zero), whose remainders the last levels hold.
  std::mt19937_64 g(37);
  const size_t m = 9, n = 35, k = 1000;
  std::vector<float> a(m * k, 0.0f), b(k * n, 0.0f);
  for (size_t i = 0; i < m; ++i) {
    a[i * k] = 1.0f + std::ldexp(static_cast<float>(g() % 4096), -12);
    a[i * k + 1] = std::array{0x1.000002p-60f, -0x1.000002p-60f, 0.0f}[i % 3];
  }
  for (size_t j = 0; j < n; ++j) {
    b[j] = 1.0f + std::ldexp(static_cast<float>(g() % 4096), -12);
    b[n + j] = 0x1.000002p0f;
    b[(k - 1) * n + j] = 0x1p-23f;  // keeps the column's span from depending on b[j]
  }
  check_exact_gemm(a, b, m, n, k, fp::fp32(), fp::Mode::rne, "midpoints");
}

TEST_CASE(
    "exact gemm == exact reference per output at the edges of its forms' ranges: remainders of one sign, every span "
    "from 48 to 178") {
  // The forms' conditions bound a level's sum by k times its largest remainder. Constant products
  // reach that bound: row e is a value near 1 and its negation (its top) and k - 2 copies of one
  // value near 2^-e (whose fine grid every level must hold), every column one value near 1, so
  // each level's remainders are all alike; k = 2^L - 1 makes k as large as L allows. The big
  // products cancel, so that a bit lost at the bottom shows in the exact value's 64 bits. Row e
  // spans e + 24 binades, a column 24: rows from 0 to 130 cross both forms' limits for every k.
  std::mt19937_64 g(31);
  auto full = [&](int shift) {  // a 24-bit significand with its last bit set, near 2^-shift
    return std::ldexp(static_cast<float>((g() % (1 << 23)) | (1 << 23) | 1), -23 - shift);
  };
  for (size_t k : {127, 1023, 4095}) {
    const size_t m = 131, n = 35;
    std::vector<float> a(m * k), b(k * n);
    for (size_t i = 0; i < m; ++i) {
      const float top = full(0), small = full(static_cast<int>(i));
      for (size_t t = 0; t < k; ++t) a[i * k + t] = t == 0 ? top : t == 1 ? -top : small;
    }
    for (size_t j = 0; j < n; ++j) {
      const float column = g() % 2 ? full(0) : -full(0);
      for (size_t t = 0; t < k; ++t) b[t * n + j] = column;
    }
    check_exact_gemm(a, b, m, n, k, fp::fp32(), fp::Mode::rne, "edges");
  }
}

// ---- GEMMs whose first reduction is not an FMA chain: the product-term path
// (sim/gemm_product_terms.cpp) and the tensor-core lane form (fused_multiply_add_lanes).

namespace {

struct Shape {
  size_t m, n, k;
};
// K = 1, K below every group and fused chunk size, partial 4 x 64 tiles, non-powers of two.
const Shape awkward_shapes[] = {{1, 1, 1}, {4, 64, 1}, {5, 70, 7}, {3, 130, 33}, {9, 65, 100}, {2, 3, 257}};

// Every output of sim::gemm against dot_reference with its own noise key (every 7th column
// of wide matrices unless every_column). Both must throw, or neither.
void check_gemm(const Schedule& s, const std::vector<float>& a, const std::vector<float>& b, const Shape& sh,
                const Arithmetic& arithmetic, const std::string& label, bool every_column = false) {
  const NoiseKey key{5, 1, 2};
  std::vector<float> c(sh.m * sh.n);
  bool engine_threw = false, reference_threw = false;
  try {
    gemm(s, a.data(), b.data(), c.data(), {sh.m, sh.n, sh.k}, arithmetic, key);
  } catch (const std::invalid_argument&) {
    engine_threw = true;
  }
  for (size_t i = 0; i < sh.m; ++i)
    for (size_t j = 0; j < sh.n; j += (sh.n > 20 && !every_column ? 7 : 1)) {
      std::vector<double> row(sh.k), col(sh.k);
      for (size_t t = 0; t < sh.k; ++t) row[t] = a[i * sh.k + t], col[t] = b[t * sh.n + j];
      double expected = 0;
      try {
        expected = dot_reference(s, row, col, arithmetic, gemm_output_key(key, i, j, sh.n));
      } catch (const std::invalid_argument&) {
        reference_threw = true;
      }
      INFO(label << " " << to_string(s) << " " << arithmetic.to_string() << " shape " << sh.m << "x" << sh.n << "x"
                 << sh.k << " output (" << i << "," << j << ")");
      REQUIRE(engine_threw == reference_threw);
      // C is fp32: a wider format's result is stored rounded to nearest, as sim::gemm documents.
      if (!engine_threw) REQUIRE(same_bits(c[i * sh.n + j], static_cast<float>(expected)));
    }
}

}  // namespace

TEST_CASE(
    "engine gemm == reference: non-seq first stages on product terms x fp32/fp64/bf16/rz/sr x fused/exact/rounded "
    "products") {
  std::mt19937_64 g(23);
  std::normal_distribution<float> d;
  const char* schedules[] = {"all:tree",
                             "all:rev",
                             "all:shfl_down",
                             "all:shfl_up",
                             "all:shfl_xor",
                             "all:atomic",
                             "all:ring",
                             "all:numpy_pairwise",
                             "all:kahan",
                             "all:neumaier",
                             "all:binned",
                             "contig(16):exact | all:seq",
                             "contig(5):tree | all:seq",
                             "split(3):rev | all:tree",
                             "shuffle | all:tree",
                             "strided(4):shfl_up | contig(2):kahan | all:seq",
                             "shuffle | shuffle | split(2):atomic | all:ring",
                             "all:seq",
                             "systolic(16)",
                             "pairwise",
                             "splitk-tree(3)",
                             "all:fused(8,25)",
                             "split(16):fused(8,25) | all:seq",
                             "contig(24):fused(8,24) | all:tree"};
  const Arithmetic arithmetics[] = {arithmetic_of(fp::fp32(), fp::Mode::rne, Products::fused),
                                    arithmetic_of(fp::fp32(), fp::Mode::rne, Products::exact),
                                    arithmetic_of(fp::fp32(), fp::Mode::rne, Products::rounded),
                                    arithmetic_of(fp::fp64(), fp::Mode::rne),
                                    arithmetic_of(fp::fp64(), fp::Mode::rne, Products::exact),
                                    arithmetic_of(fp::bf16(), fp::Mode::rne),
                                    arithmetic_of(fp::fp32(), fp::Mode::rz, Products::exact),
                                    arithmetic_of(fp::fp16(), fp::Mode::sr),
                                    arithmetic_of(fp::bf16(), fp::Mode::sr, Products::rounded)};
  for (const char* text : schedules) {
    const Schedule s = parse_schedule(text);
    for (const Arithmetic& ar : arithmetics) {
      for (const Shape& sh : awkward_shapes) {
        std::vector<float> a(sh.m * sh.k), b(sh.k * sh.n);
        for (auto& x : a) x = d(g);
        for (auto& x : b) x = d(g) * std::exp2(static_cast<float>(g() % 8));
        // Exact cancellations, so that signs of zero and rounding of tiny sums show.
        for (size_t t = 1; t < sh.k; t += 3) a[t] = a[t - 1], b[t * sh.n] = -b[(t - 1) * sh.n];
        check_gemm(s, a, b, sh, ar, "");
        // An infinite factor (inf times finite products meeting finite ones, and inf - inf where
        // a second one of the other sign meets it), and a NaN.
        a[sh.k > 3 ? 3 : 0] = INFINITY;
        check_gemm(s, a, b, sh, ar, "inf");
        if (sh.m > 1) a[sh.k + (sh.k > 3 ? 3 : 0)] = -INFINITY, b[sh.n - 1] = NAN;
        check_gemm(s, a, b, sh, ar, "inf, -inf, NaN");
      }
    }
  }
}

TEST_CASE(
    "engine gemm == reference: seq chains in narrow formats (fp32 vectors cut to the format) x 11 formats x 2 grids x "
    "rne/rna "
    "x fused/rounded x flush/saturate x ties, wide ranges, zeros, long K") {
  // sim/narrow_chain_tile.cpp: its cut is right unless fp32's result lands on one of the format's
  // decision points; "ties" data (factors of few bits) put many results there, exactly or not,
  // so that blocks are redone lane by lane; "wide" data overflow and fall below the format's
  // normal range; for the formats it scales, "normal" data take A's and B's factors scaled by
  // half the scale each, "ties" B's by the whole, "tiny" (a factor of A and of B near 2^-110)
  // neither: each result is scaled there and back; "one line" (normal data but one row of A and
  // one column of B whose chain passes the format's largest value: the chains skip their range
  // check only where no chain can reach it); "nonfinite" (ties or normal data with an infinity or
  // NaN in A or B), which the fast path turns away; "low ties" (factors of few bits scaled so
  // that products land about the format's least subnormal, from a thousandth of it to a few
  // hundred times it: results on the grid below the least normal, many of them on its midpoints,
  // which the formats the cut scales take in fp32's own scale, SubnormalGrid). Every column is
  // checked.
  std::mt19937_64 g(37);
  std::normal_distribution<double> d;
  // The last three: groups of one product each for the shorter K, folded in sequence
  // (narrow_chain_tile.cpp's product_fold_tile, Step::fold; mutations of it fail here).
  const char* schedules[] = {"all:seq",
                             "split(3):seq | all:tree",
                             "contig(33):seq | all:seq",
                             "strided(5):seq | all:atomic",
                             "split(80):seq | all:atomic",
                             "strided(40):seq | all:ring",
                             "split(64):seq | all:rev"};
  const char* formats[] = {"bf16",   "fp16",   "tf32", "e4m3",  "e5m2",    "float8_e4m3",
                           "e3m2fn", "e2m1fn", "e6m9", "e8m22", "e4m3fnuz" /* not taken: the generic path */};
  enum Data { normal, ties, wide, zeros, tiny, one_line, low_ties, nonfinite };
  const Shape shapes[] = {{1, 1, 1}, {5, 70, 7}, {3, 130, 33}, {9, 65, 100}, {2, 3, 257}, {4, 20, 1000}};
  // Formats the cut scales run on each grid (sim::detail::NarrowChainGrid), whatever the host picks.
  struct HostGrid {
    ~HostGrid() { sim::detail::set_narrow_chain_grid(sim::detail::NarrowChainGrid::host); }
  } restore;
  for (const auto grid : {sim::detail::NarrowChainGrid::scaled, sim::detail::NarrowChainGrid::subnormal})
    for (const char* text : schedules) {
      sim::detail::set_narrow_chain_grid(grid);
      const Schedule s = parse_schedule(text);
      const bool folds = s.stages.size() == 2 && s.stages[0].grouping.size >= 40;  // the shapes of K <= 33
      for (const char* name : formats) {
        if (grid == sim::detail::NarrowChainGrid::subnormal && fp::parse_format(name).emin() <= -126) continue;
        for (const fp::Mode mode : {fp::Mode::rne, fp::Mode::rna}) {
          for (const Products products : {Products::fused, Products::rounded}) {
            for (int options = 0; options < 3; ++options) {  // plain, flush subnormals, saturate
              Arithmetic ar = arithmetic_of(fp::parse_format(name), mode, products);
              ar.flush_subnormals = options == 1;
              ar.saturate = options == 2;
              for (int data = normal; data <= nonfinite; ++data) {
                const Shape sh = shapes[g() % (folds ? 3 : std::size(shapes))];
                // Factors of few significant bits: their products and sums are often exactly
                // representable, on a midpoint of the format's grid or just beside one.
                const bool few_bits = data == ties || data == low_ties || (data == nonfinite && g() % 2);
                // low_ties: each factor times the square root of the least subnormal, 2^((emin - m) / 2)
                const int low = data == low_ties ? (ar.format.emin() - ar.format.man_bits) / 2 : 0;
                auto value = [&] {
                  if (few_bits)
                    return std::ldexp(static_cast<float>(static_cast<int>(g() % 33) - 16),
                                      low - static_cast<int>(g() % 6));
                  const double spread = data == wide ? std::exp2(std::round(d(g) * 12)) : 1.0;
                  return static_cast<float>(d(g) * spread);
                };
                std::vector<float> a(sh.m * sh.k), b(sh.k * sh.n);
                for (auto& x : a) x = value();
                for (auto& x : b) x = value();
                if (data == zeros) {  // zero lines (+-0) and exact cancellation to zero
                  for (size_t t = 0; t < sh.k; ++t) a[t] = (t % 2) ? -0.0f : 0.0f, b[t * sh.n + sh.n - 1] = 0.0f;
                  for (size_t t = 1; t < sh.k; t += 2)
                    for (size_t i = 1; i < sh.m; ++i) a[i * sh.k + t] = -a[i * sh.k + t - 1];
                  for (size_t t = 1; t < sh.k; t += 2)
                    for (size_t j = 0; j < sh.n; ++j) b[t * sh.n + j] = b[(t - 1) * sh.n + j];
                  if (sh.m > 2)  // A's last row -0, B's last column +0: output (m-1, n-1) a sum of -0s
                    for (size_t t = 0; t < sh.k; ++t) a[(sh.m - 1) * sh.k + t] = -0.0f;
                }
                if (data == tiny) a[g() % a.size()] = 0x1.8p-110f, b[g() % b.size()] = -0x1.4p-109f;
                if (data == one_line) {  // its partial sums climb to 3 times the largest value
                  const size_t row = g() % sh.m, col = g() % sh.n;
                  const double step = std::min(3 * ar.format.max_finite() / double(sh.k), 1e37);
                  for (size_t t = 0; t < sh.k; ++t)
                    a[row * sh.k + t] = std::fabs(a[row * sh.k + t]) + 1, b[t * sh.n + col] = static_cast<float>(step);
                }
                if (data == nonfinite) {
                  const float special[] = {std::numeric_limits<float>::infinity(),
                                           -std::numeric_limits<float>::infinity(),
                                           std::numeric_limits<float>::quiet_NaN()};
                  auto& side = g() % 2 ? a : b;
                  side[g() % side.size()] = special[g() % 3];
                }
                check_gemm(s, a, b, sh, ar,
                           std::string(name) + " data " + std::to_string(data) + " options " + std::to_string(options) +
                               (grid == sim::detail::NarrowChainGrid::subnormal && options != 1 ? " subnormal grid"
                                                                                                : " scaled grid"),
                           true);
              }
            }
          }
        }
      }
    }
}

TEST_CASE(
    "engine gemm == reference: fused(N,F) first stages x tf32/bf16/fp16/e4m3/fp32 data x fp32/e8m13/bf16/fp16 results "
    "x zeros, subnormals, cancellation, inf/NaN") {
  std::mt19937_64 g(29);
  std::normal_distribution<double> d;
  const char* schedules[] = {"tc-h100-tf32",
                             "tc-h100-tf32-rne",
                             "tc-h100-tf32-rna",
                             "tc-h100-bf16",
                             "tc-h100-fp8",
                             "tc-v100",
                             "tc-a100",
                             "split(16):fused(8,25) | all:seq",
                             "strided(3):fused(4,24) | all:atomic",
                             "shuffle | all:fused(8,25)",
                             "contig(8):fused(16,25) | contig(3):seq | all:tree",
                             "all:fused(64,48)" /* F too wide for the lane form: the scalar step per lane */,
                             "all:fused(8,25,tf32)",
                             "split(16):fused(16,25,bf16) | all:seq",
                             "contig(8):fused(32,13,e4m3) | all:tree",
                             "all:fused(16,25,fp16)",
                             "contig(4):seq | all:fused(8,25,tf32)" /* partial sums converted too */};
  const Arithmetic arithmetics[] = {arithmetic_of(fp::fp32(), fp::Mode::rne),
                                    arithmetic_of(fp::parse_format("e8m13"), fp::Mode::rz),
                                    arithmetic_of(fp::bf16(), fp::Mode::rne), arithmetic_of(fp::fp16(), fp::Mode::rne),
                                    arithmetic_of(fp::fp32(), fp::Mode::rd, Products::rounded)};
  const fp::Format inputs[] = {fp::tf32(), fp::bf16(), fp::fp16(), fp::e4m3(), fp::fp32()};
  enum Data { normal, wide, zero_lines, subnormal, cancelling, special };
  for (const char* text : schedules) {
    const Schedule s = parse_schedule(text);
    for (const Arithmetic& ar : arithmetics) {
      for (const fp::Format& input : inputs) {
        for (int data = normal; data <= special; ++data) {
          const Shape sh = awkward_shapes[g() % std::size(awkward_shapes)];
          auto value = [&] {
            const double spread = data == wide ? std::exp2(std::round(d(g) * 10)) : 1.0;
            const double x = fp::round_double(d(g) * spread, input, {}).value;
            return static_cast<float>(x);
          };
          std::vector<float> a(sh.m * sh.k), b(sh.k * sh.n);
          for (auto& x : a) x = value();
          for (auto& x : b) x = value();
          if (data == zero_lines)  // a row of +-0 (all products zero), a column of +0
            for (size_t t = 0; t < sh.k; ++t) a[(sh.m - 1) * sh.k + t] = (t % 2) ? -0.0f : 0.0f, b[t * sh.n] = 0.0f;
          if (data == subnormal)
            for (size_t x = 0; x < a.size(); x += 3) a[x] = std::ldexp(a[x], -130);
          if (data == cancelling)  // pairs of products that cancel exactly
            for (size_t t = 1; t < sh.k; t += 2)
              for (size_t i = 0; i < sh.m; ++i)
                a[i * sh.k + t] = -a[i * sh.k + t - 1], b[t * sh.n + (i % sh.n)] = b[(t - 1) * sh.n + (i % sh.n)];
          if (data == special) {
            a[0] = INFINITY;
            b[(sh.k - 1) * sh.n + sh.n - 1] = NAN;
            if (sh.m > 1) a[sh.k] = -INFINITY, b[0] = 0.0f;  // inf * 0
            if (sh.m > 2) a[2 * sh.k] = std::numeric_limits<float>::max();
          }
          check_gemm(s, a, b, sh, ar, input.name + " data " + std::to_string(data));
        }
      }
    }
  }
}

TEST_CASE(
    "engine gemm == reference: every tensor-core preset and input format through the fused first stage, long K, "
    "zero rows, cancellation, out-of-range and special values") {
  // sim/fused_first_stage.cpp and the grid form of sim/fused_grid.cpp: typical data stays in the
  // grid form, the other kinds send blocks (or whole GEMMs) to the step-by-step path.
  std::mt19937_64 g(31);
  std::normal_distribution<float> d;
  const char* schedules[] = {"tc-v100",
                             "tc-turing-unconverted",
                             "tc-a100",
                             "tc-a100-bf16",
                             "tc-a100-tf32",
                             "tc-h100-tf32",
                             "tc-h100-tf32-rne",
                             "tc-h100-tf32-rna",
                             "tc-h100-bf16",
                             "tc-h100-fp16",
                             "tc-h100-fp8",
                             "all:fused(32,13,e5m2)",
                             "all:fused(8,25)",
                             "split(16):fused(8,25,tf32) | all:seq",
                             "split(4):fused(16,25,fp16) | all:tree",
                             "contig(64):fused(5,24,bf16) | all:seq",
                             "strided(3):fused(8,25,tf32) | all:atomic"};
  const Shape shapes[] = {{7, 70, 600}, {4, 64, 1}, {5, 33, 129}, {9, 130, 40}};
  enum Data { normal, zero_rows, cancelling, tiny_and_huge, special };
  for (const char* text : schedules) {
    const Schedule s = parse_schedule(text);
    for (const Shape& sh : shapes)
      for (int data = normal; data <= special; ++data) {
        std::vector<float> a(sh.m * sh.k), b(sh.k * sh.n);
        for (auto& x : a) x = d(g);
        for (auto& x : b) x = d(g);
        if (data == zero_rows)
          for (size_t t = 0; t < sh.k; ++t) {
            a[t] = (t % 2) ? -0.0f : 0.0f;  // row 0: every product zero
            if (t % 3 == 0) b[t * sh.n + sh.n - 1] = 0.0f;
          }
        if (data == cancelling)
          for (size_t t = 1; t < sh.k; t += 2)
            for (size_t j = 0; j < sh.n; ++j) b[t * sh.n + j] = -b[(t - 1) * sh.n + j], a[t] = a[t - 1];
        if (data == tiny_and_huge)
          a[g() % a.size()] = 0x1p-100f, b[g() % b.size()] = 0x1p-140f, a[g() % a.size()] = 3e9f;
        if (data == special) a[g() % a.size()] = INFINITY, b[g() % b.size()] = NAN, b[g() % b.size()] = -INFINITY;
        check_gemm(s, a, b, sh, arithmetic_of(fp::fp32(), fp::Mode::rne), "data " + std::to_string(data));
      }
  }
}

TEST_CASE(
    "fused(N,F,INPUT) == fused(N,F) on factors converted beforehand (tf32 truncated, tf32rne/tf32rna and the others to "
    "nearest)") {
  // An independent route: the test converts the data with fp::round_double, the engine inside
  // the fused step (its GEMM tile form and its sum form), both held to the same bits.
  std::mt19937_64 g(31);
  std::normal_distribution<double> d;
  struct Case {
    const char* input;
    fp::Format format;
    fp::Mode mode;
  };
  const Case cases[] = {{"tf32", fp::tf32(), fp::Mode::rz},     {"tf32rne", fp::tf32(), fp::Mode::rne},
                        {"tf32rna", fp::tf32(), fp::Mode::rna}, {"bf16", fp::bf16(), fp::Mode::rne},
                        {"fp16", fp::fp16(), fp::Mode::rne},    {"e5m2", fp::e5m2(), fp::Mode::rne}};
  const Arithmetic ar = arithmetic_of(fp::fp32(), fp::Mode::rne);
  for (const Case& c : cases)
    for (const Shape& sh : awkward_shapes) {
      std::vector<float> a(sh.m * sh.k), b(sh.k * sh.n), a_in(a.size()), b_in(b.size());
      auto convert = [&](float x) { return static_cast<float>(fp::round_double(x, c.format, {c.mode}).value); };
      for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(d(g) * 3), a_in[i] = convert(a[i]);
      for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(d(g) * 3), b_in[i] = convert(b[i]);
      for (const std::string stages : {"all:fused(8,25", "split(4):fused(16,25"}) {
        const std::string tail = stages.rfind("split", 0) == 0 ? ") | all:seq" : ")";
        const Schedule with_input = parse_schedule(stages + "," + c.input + tail);
        const Schedule plain = parse_schedule(stages + tail);
        std::vector<float> c1(sh.m * sh.n), c2(sh.m * sh.n);
        gemm(with_input, a.data(), b.data(), c1.data(), {sh.m, sh.n, sh.k}, ar);
        gemm(plain, a_in.data(), b_in.data(), c2.data(), {sh.m, sh.n, sh.k}, ar);
        size_t same = 0, changed = 0;
        for (size_t i = 0; i < c1.size(); ++i) same += std::bit_cast<uint32_t>(c1[i]) == std::bit_cast<uint32_t>(c2[i]);
        // ... and the conversion matters: the unconverted data give other results somewhere.
        std::vector<float> c3(sh.m * sh.n);
        gemm(plain, a.data(), b.data(), c3.data(), {sh.m, sh.n, sh.k}, ar);
        for (size_t i = 0; i < c1.size(); ++i) changed += c1[i] != c3[i];
        INFO(c.input << " " << to_string(with_input) << " " << sh.m << "x" << sh.n << "x" << sh.k);
        CHECK(same == c1.size());
        if (sh.k >= 4) CHECK(changed > 0);
      }
      // Sums: values enter as value * 1, so a fused sum converts the values.
      std::vector<double> v(1000), v_in(1000);
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = static_cast<float>(d(g)), v_in[i] = convert(static_cast<float>(v[i]));
      const double s1 = reduce(parse_schedule(std::string("all:fused(8,25,") + c.input + ")"), v, ar);
      const double s2 = reduce(parse_schedule("all:fused(8,25)"), v_in, ar);
      INFO(c.input << " sum");
      CHECK(std::bit_cast<uint64_t>(s1) == std::bit_cast<uint64_t>(s2));
    }
}

TEST_CASE(
    "engine gemm == reference: tree, rev, shfl, numpy_pairwise, kahan and neumaier first stages in registers x every "
    "output of full and partial tiles x zeros, subnormals, overflow, cancellation, inf/NaN") {
  // The fp32 round-to-nearest tile kernels (sim/product_program_tile.cpp, sim/compensated_tile.cpp)
  // on every vector form: K = 1 and K of no particular size, groups of one, partial 4 x 64 tiles
  // (masked columns, rows past M), full ones (B packed), and every output checked.
  std::mt19937_64 g(37);
  std::normal_distribution<float> d;
  const char* schedules[] = {"all:tree",
                             "all:rev",
                             "all:shfl_down",
                             "all:shfl_up",
                             "all:shfl_xor",
                             "all:numpy_pairwise",
                             "all:kahan",
                             "all:neumaier",
                             "contig(32):tree | all:seq",
                             "contig(5):rev | all:tree",
                             "strided(3):shfl_up | all:seq",
                             "split(4):numpy_pairwise | all:rev",
                             "contig(1):tree | all:seq",
                             "split(3):kahan | all:tree",
                             "strided(2):neumaier | contig(2):seq | all:seq"};
  const Arithmetic arithmetics[] = {arithmetic_of(fp::fp32(), fp::Mode::rne, Products::fused),
                                    arithmetic_of(fp::fp32(), fp::Mode::rne, Products::rounded),
                                    arithmetic_of(fp::fp32(), fp::Mode::rne, Products::exact)};
  const Shape shapes[] = {{1, 1, 1}, {4, 64, 1},   {3, 17, 2},  {5, 70, 3},   {8, 128, 4},
                          {2, 9, 5}, {9, 130, 31}, {4, 64, 64}, {7, 33, 100}, {5, 72, 257}};
  enum Data { normal, wide, signed_zeros, subnormal, cancelling, overflow, special };
  for (const char* text : schedules) {
    const Schedule s = parse_schedule(text);
    for (const Arithmetic& ar : arithmetics)
      for (const Shape& sh : shapes)
        for (int data = normal; data <= special; ++data) {
          std::vector<float> a(sh.m * sh.k), b(sh.k * sh.n);
          const float spread = data == wide ? 20.0f : 0.0f;
          for (auto& x : a) x = d(g) * std::exp2(std::round(d(g) * spread));
          for (auto& x : b) x = d(g) * std::exp2(std::round(d(g) * spread));
          if (data == signed_zeros)  // products of +-0 meeting each other and values
            for (size_t x = 0; x < a.size(); ++x)
              if (g() % 3) a[x] = (g() % 2) ? -0.0f : 0.0f;
          if (data == subnormal)  // subnormal factors and products below the smallest subnormal
            for (size_t x = 0; x < a.size(); x += 2) a[x] = std::ldexp(a[x], -(120 + static_cast<int>(g() % 20)));
          if (data == cancelling)  // pairs of products that cancel exactly: sums of zero
            for (size_t t = 1; t < sh.k; t += 2)
              for (size_t j = 0; j < sh.n; ++j) {
                for (size_t i = 0; i < sh.m; ++i) a[i * sh.k + t] = a[i * sh.k + t - 1];
                b[t * sh.n + j] = -b[(t - 1) * sh.n + j];
              }
          if (data == overflow)  // products beyond fp32 that an FMA keeps and a rounding does not
            for (size_t x = 0; x < a.size(); x += 3) a[x] = std::ldexp(a[x] < 0 ? -1.5f : 1.5f, 100 + (x % 28));
          if (data == special)
            for (size_t x = 0; x < a.size(); x += 5)
              a[x] = std::array{INFINITY, -INFINITY, NAN, 0.0f, std::numeric_limits<float>::max()}[g() % 5];
          check_gemm(s, a, b, sh, ar, "data " + std::to_string(data), true);
        }
  }
}
