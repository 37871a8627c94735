// The GPU's exact sums (sim/cuda/long_accumulator.hpp), compiled for the host: every dot product
// and every sum of values it rounds == the reference evaluator's `all:exact` in fp32 (to nearest
// even), bit for bit, on data chosen to reach each branch: wide exponent ranges, subnormal factors
// and results, signed zeros (all negative, mixed, cancelling), exact cancellation leaving tiny
// remainders, ties to even, overflow past fp32's range, infinities and NaNs.
#include <catch2/catch.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sim/cuda/long_accumulator.hpp"
#include "sim/reference_evaluator.hpp"
#include "sim/schedule.hpp"
#include "tests/same_bits.hpp"

using namespace fplab;
using namespace fplab::sim;
using fplab::test::same_bits;

namespace {

enum class Data { normal, wide, subnormal, zeros, negative_zeros, cancelling, ties, overflow, tiny_sums, special };

// Row r of a (k terms) and of b for data kind `data`.
void fill(Data data, std::mt19937_64& g, size_t k, std::vector<float>& a, std::vector<float>& b) {
  std::normal_distribution<float> d;
  std::uniform_int_distribution<int> wide(-140, 120), low(-149, -100);
  a.assign(k, 0.0f);
  b.assign(k, 0.0f);
  for (size_t t = 0; t < k; ++t) {
    switch (data) {
      case Data::normal:
        a[t] = d(g), b[t] = d(g);
        break;
      case Data::wide:
        a[t] = std::ldexp(d(g), wide(g) / 2), b[t] = std::ldexp(d(g), wide(g) / 2);
        break;
      case Data::subnormal:  // subnormal factors against large ones, and subnormal results
        a[t] = std::ldexp(d(g), low(g)), b[t] = t % 2 ? std::ldexp(d(g), 60) : d(g);
        break;
      case Data::zeros:
        a[t] = t % 3 ? d(g) : (t % 2 ? -0.0f : 0.0f), b[t] = t % 5 ? d(g) : 0.0f;
        break;
      case Data::negative_zeros:  // every product a zero of negative sign (then -0), or one not
        a[t] = -0.0f, b[t] = g() % 64 || t ? 1.0f + static_cast<float>(t) : -2.0f;
        break;
      case Data::cancelling:  // pairs t, t + 1 cancel; a tiny product left over in some rows
        if (t % 2 == 0) a[t] = d(g), b[t] = std::ldexp(d(g), static_cast<int>(g() % 40) - 20);
        if (t % 2 == 1) a[t] = a[t - 1], b[t] = -b[t - 1];
        if (t == k - 1 && k % 2 == 1) a[t] = g() % 2 ? std::ldexp(1.0f, -130) : 0.0f, b[t] = -3.0f;
        break;
      case Data::ties:  // (1 + u)(1 + v) + 2^-k terms: sums on fp32's midpoints, and beside them
        a[t] = t == 0 ? 1.0f + std::ldexp(static_cast<float>(g() % 4096), -12) : std::ldexp(1.0f, -24 - static_cast<int>(t));
        b[t] = t == 0 ? 1.0f + std::ldexp(static_cast<float>(g() % 4096), -12) : (g() % 3 == 0 ? -1.0f : 1.0f);
        break;
      case Data::overflow:
        a[t] = std::ldexp(1.0f + d(g) * 0.1f, 64), b[t] = std::ldexp(1.0f + d(g) * 0.1f, 63);
        break;
      case Data::tiny_sums:  // products around 2^-150 and below: subnormal and underflowing sums
        a[t] = std::ldexp(d(g), -75), b[t] = std::ldexp(d(g), -74 - static_cast<int>(g() % 8));
        break;
      case Data::special:
        a[t] = d(g), b[t] = d(g);
        if (g() % 7 == 0) a[t] = std::array{INFINITY, -INFINITY, NAN, 0.0f}[g() % 4];
        if (g() % 11 == 0) b[t] = std::array{INFINITY, -INFINITY, 0.0f}[g() % 3];
        break;
    }
  }
}

}  // namespace

TEST_CASE("long accumulator == the reference's all:exact in fp32: dot products and sums, every branch") {
  std::mt19937_64 g(29);
  const Schedule exact = parse_schedule("all:exact");
  Arithmetic arithmetic;  // fp32, to nearest even
  arithmetic.products = Products::exact;
  size_t zeros = 0, negative_zeros = 0, subnormals = 0, infinities = 0, nans = 0;
  for (Data data : {Data::normal, Data::wide, Data::subnormal, Data::zeros, Data::negative_zeros, Data::cancelling,
                    Data::ties, Data::overflow, Data::tiny_sums, Data::special})
    for (size_t k : {size_t{1}, size_t{2}, size_t{3}, size_t{17}, size_t{256}, size_t{1001}})
      for (int rep = 0; rep < 40; ++rep) {
        std::vector<float> a, b;
        fill(data, g, k, a, b);
        gpu::LongAccumulator dot, sum, first_part, second_part;
        for (size_t t = 0; t < k; ++t) dot.add_product(a[t], b[t]), sum.add_value(a[t]);
        // the same dot product accumulated in two parts (one possibly empty) and merged
        for (size_t t = 0; t < k; ++t) (t < k / 3 ? first_part : second_part).add_product(a[t], b[t]);
        first_part.merge(second_part);
        REQUIRE(std::bit_cast<uint32_t>(first_part.round_to_fp32()) == std::bit_cast<uint32_t>(dot.round_to_fp32()));
        const std::vector<double> da(a.begin(), a.end()), db(b.begin(), b.end());
        const double want_dot = dot_reference(exact, da, db, arithmetic);
        const double want_sum = reduce_reference(exact, da, arithmetic);
        const float got_dot = dot.round_to_fp32(), got_sum = sum.round_to_fp32();
        INFO("data " << static_cast<int>(data) << ", k " << k << ", rep " << rep << ": dot " << got_dot << " want "
                     << want_dot << ", sum " << got_sum << " want " << want_sum);
        REQUIRE(same_bits(static_cast<double>(got_dot), want_dot));
        REQUIRE(same_bits(static_cast<double>(got_sum), want_sum));
        zeros += got_dot == 0, negative_zeros += got_dot == 0 && std::signbit(got_dot);
        subnormals += got_dot != 0 && std::fabs(got_dot) < 0x1p-126f, infinities += std::isinf(got_dot);
        nans += std::isnan(got_dot);
      }
  // the cases reached what they are for
  CHECK(zeros > 100);
  CHECK(negative_zeros > 20);
  CHECK(subnormals > 50);
  CHECK(infinities > 20);
  CHECK(nans > 20);
  // no terms: +0
  CHECK(std::bit_cast<uint32_t>(gpu::LongAccumulator{}.round_to_fp32()) == 0u);
}
