// The fused tensor-core step with OCP MX inputs (fused(N,F,mxe4m3) ..., sim/mx_factors.hpp): the
// grammar, the refusals, dot_reference against an independent evaluation (the factors quantized
// by the MPFR quantizer of tests/mx_reference.hpp, then fused_dot on the exact products of the
// dequantized values), and the engine's GEMM against dot_reference output by output.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "sim/engine.hpp"
#include "sim/mx_factors.hpp"
#include "sim/reference_evaluator.hpp"
#include "sim/tensor_core.hpp"
#include "tests/mx_reference.hpp"
#include "tests/same_bits.hpp"

using namespace fplab;
using namespace fplab::sim;
using test::same_bits;

namespace {

const char* const kInputs[] = {"mxe4m3", "mxe5m2", "mxe3m2", "mxe2m3", "mxe2m1"};

// Floats over a few binades per block of 32, with zeros, so that blocks get different scales and
// small elements fall to subnormals or zero.
std::vector<float> factors(std::mt19937_64& g, size_t count) {
  std::normal_distribution<float> d;
  std::vector<float> v(count);
  int block_shift = 0;
  for (size_t i = 0; i < count; ++i) {
    if (i % 32 == 0) block_shift = static_cast<int>(g() % 40) - 20;
    v[i] = g() % 9 == 0 ? 0.0f : std::ldexp(d(g), block_shift - static_cast<int>(g() % 10));
  }
  return v;
}

}  // namespace

TEST_CASE("mx inputs: grammar, element formats, and the refusals") {
  for (const char* input : kInputs) {
    const std::string text = std::string("all:fused(32,25,") + input + ")";
    CHECK(to_string(parse_schedule(text)) == text);
    CHECK(mx_element_format(parse_schedule(text).stages[0].reducer.fused_input).has_value());
  }
  CHECK(*mx_element_format(Reducer::Input::mxe3m2) == fp::e3m2fn());
  CHECK(!mx_element_format(Reducer::Input::e4m3));
  CHECK(*mx_input_of(parse_schedule("body(64)[contig(32):fused(16,25,mxe2m1)] | all:seq")) == fp::e2m1fn());
  CHECK(without_mx_inputs(parse_schedule("contig(32):fused(16,25,mxe2m1) | all:fused(8,25,tf32)")) ==
        parse_schedule("contig(32):fused(16,25) | all:fused(8,25,tf32)"));

  const std::vector<double> values(40, 1.0);
  const Schedule mx = parse_schedule("all:fused(32,25,mxe4m3)");
  const std::string why =
      "fused(N,F,mxe4m3): MX block scaling needs the factors of a dot product or GEMM; a "
      "reduction of values has none";
  CHECK_THROWS_WITH(reduce_reference(mx, values, Arithmetic{}), why);
  CHECK_THROWS_WITH(reduce(mx, values, Arithmetic{}), why);
  std::vector<double> out(2);
  CHECK_THROWS_WITH(reduce_batch(mx, values.data(), 20, 2, Arithmetic{}, {}, out.data()), why);
  CHECK_THROWS_AS(dot_reference(parse_schedule("contig(32):fused(32,25,mxe4m3) | all:fused(8,25,mxe5m2)"), values,
                                values, Arithmetic{}),
                  std::invalid_argument);
}

TEST_CASE("mx inputs: dot_reference == fused_dot on the independently quantized factors, 5 formats, N 4..32") {
  std::mt19937_64 g(1919);
  for (const char* input : kInputs) {
    const fp::Format element =
        *mx_element_format(parse_schedule(std::string("all:fused(8,25,") + input + ")").stages[0].reducer.fused_input);
    for (int n : {4, 8, 16, 32})
      for (size_t k : {1, 31, 32, 33, 100, 256}) {
        const std::vector<float> a32 = factors(g, k), b32 = factors(g, k);
        const std::vector<double> a(a32.begin(), a32.end()), b(b32.begin(), b32.end());
        const Schedule s = parse_schedule("all:fused(" + std::to_string(n) + ",25," + std::string(input) + ")");
        FusedAddSpec spec;  // fused_reducer_spec's for fp32: no conversion, products exact, RZ
        spec.products = n;
        spec.fraction_bits = 25;
        spec.input = fp::fp64();
        spec.output = fp::fp32();
        spec.output_mode = fp::Mode::rz;
        const double want = fused_dot(0.0, test::mx_reference_dequantized(a, element),
                                      test::mx_reference_dequantized(b, element), spec);
        INFO(to_string(s) << ", K = " << k);
        CHECK(same_bits(dot_reference(s, a, b, Arithmetic{}), want));
        // The same with a stage before and after: the quantization is of the factors, whatever the walk.
        const Schedule staged = parse_schedule("split(2):fused(" + std::to_string(n) + ",25," + input + ") | all:seq");
        CHECK(same_bits(dot_reference(staged, a, b, Arithmetic{}),
                        dot_reference(without_mx_inputs(staged), test::mx_reference_dequantized(a, element),
                                      test::mx_reference_dequantized(b, element), Arithmetic{})));
      }
  }
}

TEST_CASE("mx inputs: engine gemm == dot_reference per output, awkward shapes, infinities and NaN") {
  std::mt19937_64 g(2024);
  const char* schedules[] = {"all:fused(32,25,mxe4m3)", "all:fused(16,25,mxe2m1)",
                             "contig(64):fused(32,13,mxe5m2) | all:seq", "split(3):fused(8,24,mxe3m2) | all:tree",
                             "all:fused(4,23,mxe2m3)"};
  const struct { size_t m, n, k; } shapes[] = {{1, 1, 1}, {4, 64, 33}, {5, 70, 64}, {9, 30, 100}};
  for (const char* text : schedules) {
    const Schedule s = parse_schedule(text);
    for (const auto& sh : shapes)
      for (int specials : {0, 1}) {
        std::vector<float> a = factors(g, sh.m * sh.k), b = factors(g, sh.k * sh.n), c(sh.m * sh.n);
        if (specials) {  // an infinity dequantizes beyond fp32 (the reference path); a NaN scale
          a[g() % a.size()] = std::numeric_limits<float>::infinity();
          b[g() % b.size()] = std::numeric_limits<float>::quiet_NaN();
        }
        const NoiseKey key{5, 1, 2};
        gemm(s, a.data(), b.data(), c.data(), {sh.m, sh.n, sh.k}, Arithmetic{}, key);
        for (size_t i = 0; i < sh.m; ++i)
          for (size_t j = 0; j < sh.n; ++j) {
            std::vector<double> row(sh.k), col(sh.k);
            for (size_t t = 0; t < sh.k; ++t) row[t] = a[i * sh.k + t], col[t] = b[t * sh.n + j];
            const auto want =
                static_cast<float>(dot_reference(s, row, col, Arithmetic{}, gemm_output_key(key, i, j, sh.n)));
            INFO(text << " shape " << sh.m << "x" << sh.n << "x" << sh.k << (specials ? " with inf/NaN" : "")
                      << " output (" << i << "," << j << ")");
            REQUIRE(same_bits(c[i * sh.n + j], want));
          }
      }
  }
}
