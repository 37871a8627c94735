// The GPU's exact sums (sim/cuda/long_accumulator.hpp and certified_sum.hpp), compiled for the
// host: every dot product and every sum of values the long accumulator rounds == the reference
// evaluator's `all:exact` in fp32 (to nearest even), bit for bit, on data chosen to reach each
// branch: wide exponent ranges, subnormal factors and results, signed zeros (all negative, mixed,
// cancelling), exact cancellation leaving tiny remainders, ties to even, overflow past fp32's
// range, infinities and NaNs; and every sum the certified sum certifies == the long accumulator's,
// which it must certify for nearly all ordinary data and must not for sums on fp32's midpoints.
#include <catch2/catch.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "fp/mpfr_reference.hpp"
#include "sim/cuda/certified_sum.hpp"
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

TEST_CASE("certified sum == long accumulator wherever it certifies; it certifies ordinary sums, not midpoints") {
  std::mt19937_64 g(31);
  size_t certified = 0, tried = 0, ordinary = 0, ordinary_certified = 0;
  for (Data data : {Data::normal, Data::wide, Data::subnormal, Data::zeros, Data::negative_zeros, Data::cancelling,
                    Data::ties, Data::overflow, Data::tiny_sums, Data::special})
    for (size_t k : {size_t{1}, size_t{2}, size_t{3}, size_t{17}, size_t{256}, size_t{1001}, size_t{5000}})
      for (int rep = 0; rep < 40; ++rep) {
        std::vector<float> a, b;
        fill(data, g, k, a, b);
        gpu::LongAccumulator exact_dot, exact_sum;
        gpu::CertifiedSum dot, sum, first_part, second_part;
        for (size_t t = 0; t < k; ++t) {
          exact_dot.add_product(a[t], b[t]), exact_sum.add_value(a[t]);
          dot.add_product(a[t], b[t]), sum.add_value(a[t]);
          (t < k / 3 ? first_part : second_part).add_product(a[t], b[t]);
        }
        first_part.merge(second_part);
        const float want_dot = exact_dot.round_to_fp32(), want_sum = exact_sum.round_to_fp32();
        for (const auto& [got, want, what] : {std::tuple{&dot, want_dot, "dot"}, std::tuple{&sum, want_sum, "sum"},
                                              std::tuple{&first_part, want_dot, "dot in two parts"}}) {
          float result = 0;
          const bool sure = got->rounded_to_fp32(&result);
          ++tried, certified += sure;
          if (data == Data::normal) ++ordinary, ordinary_certified += sure;
          INFO("data " << static_cast<int>(data) << ", k " << k << ", rep " << rep << ", " << what << ": " << result
                       << " want " << want);
          if (sure) REQUIRE(std::bit_cast<uint32_t>(result) == std::bit_cast<uint32_t>(want));
        }
      }
  CHECK(ordinary_certified == ordinary);  // normal data: nowhere near a midpoint
  CHECK(certified * 10 > tried * 9);      // the GPU's fast path for nearly every sum of every kind
  // Sums exactly on an fp32 midpoint whose cascade rounded (a pair of large terms that cancel):
  // never certified, and the long accumulator's result is the tie rounded to even.
  std::uniform_int_distribution<int> large(80, 120);  // 2^28 and more a double ulp: the small terms are lost
  for (int rep = 0; rep < 2000; ++rep) {
    const float below =
        std::ldexp(1.0f + static_cast<float>(g() % (1u << 23)) * 0x1p-23f, static_cast<int>(g() % 40) - 20);
    const float half_ulp = std::ldexp(std::nextafter(below, INFINITY) - below, -1);
    const float big = std::ldexp(1.0f, large(g));
    // two orders in which a small term meets the large one (so an addition rounds)
    for (const std::vector<float>& terms :
         {std::vector<float>{below, half_ulp, big, -big}, std::vector<float>{big, below, -big, half_ulp}}) {
      gpu::CertifiedSum sum;
      gpu::LongAccumulator exact;
      for (float x : terms) sum.add_product(x, 1.0f), exact.add_value(x);
      float result = 0;
      INFO("midpoint above " << below << ", cancelling pair " << big);
      CHECK_FALSE(sum.rounded_to_fp32(&result));
      const float even = std::bit_cast<uint32_t>(below) % 2 ? std::nextafter(below, INFINITY) : below;
      CHECK(std::bit_cast<uint32_t>(exact.round_to_fp32()) == std::bit_cast<uint32_t>(even));
    }
  }
  float empty = -1.0f;  // no terms: +0, as the long accumulator
  CHECK(gpu::CertifiedSum{}.rounded_to_fp32(&empty));
  CHECK(std::bit_cast<uint32_t>(empty) == 0u);
}

TEST_CASE("certified sum: the exact sum (MPFR) lies within its error bound of its estimate") {
  // big, k terms it swallows (of both signs, so their sum in the errors rounds far more than the
  // result's magnitude), -big; and the data kinds above, in two parts merged
  std::mt19937_64 g(37);
  std::normal_distribution<float> d;
  double largest_share = 0;  // of the bound the error used: the cases must come near it
  for (int rep = 0; rep < 400; ++rep) {
    const size_t k = 1 + g() % 3000;
    const float big = std::ldexp(1.0f, 40 + static_cast<int>(g() % 60));
    std::vector<float> terms = {big};
    for (size_t t = 0; t < k; ++t) terms.push_back(std::ldexp(d(g), static_cast<int>(g() % 30) - 15));
    terms.push_back(-big);
    gpu::CertifiedSum first, second;
    fp::reference::ExactSum exact;
    for (size_t t = 0; t < terms.size(); ++t) {
      (t < terms.size() / 2 ? first : second).add_value(terms[t]);
      exact.add(terms[t]);
    }
    first.merge(second);
    const fp::reference::Exact value = exact.value(fp::Mode::rne);
    REQUIRE(value.kind == fp::reference::Kind::finite);
    fp::reference::Real error(200);
    mpfr_sub_d(error.get(), value.value.get(), first.estimate(), MPFR_RNDN);  // exact at 200 bits here
    mpfr_abs(error.get(), error.get(), MPFR_RNDN);
    INFO("rep " << rep << ", k " << k << ": error " << mpfr_get_d(error.get(), MPFR_RNDU) << ", bound "
                << first.error_bound());
    REQUIRE(mpfr_cmp_d(error.get(), first.error_bound()) <= 0);
    largest_share = std::max(largest_share, mpfr_get_d(error.get(), MPFR_RNDU) / first.error_bound());
  }
  CHECK(largest_share > 1e-3);
}
