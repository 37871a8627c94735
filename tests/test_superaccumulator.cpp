// Regime: exact accumulation. SuperAccumulator against mpfr_sum (fp/mpfr_reference.hpp) on
// random, cancelling, wide-range, subnormal, special, product and overflowing term sets, exact
// zeros and their signs: value(mode) must describe the exact sum, and round() must agree with
// the reference rounding of it in fp64 fp32 tf32 bf16 fp16 e4m3 e5m2 x every mode x flush x
// saturate. Shuffled, split-and-merged and cleared accumulators must give the same bits. The
// [carry] cases add more than 2^30 terms to cross the carry-propagation period.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>

#include <mpfr.h>

#include <catch2/catch.hpp>

#include "fp/counter_rng.hpp"
#include "fp/superaccumulator.hpp"
#include "harness.hpp"

using namespace fplab::test;
namespace fp = fplab::fp;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A term: a double (b is unused) or an exact product a * b.
struct Term {
  bool product;
  double a, b;
};

struct Terms {
  std::string name;
  std::vector<Term> terms;
  void add(double x) { terms.push_back({false, x, 0}); }
  void add_product(double a, double b) { terms.push_back({true, a, b}); }
};

void feed(fp::SuperAccumulator& acc, const std::vector<Term>& terms, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    if (terms[i].product)
      acc.add_product(terms[i].a, terms[i].b);
    else
      acc.add(terms[i].a);
  }
}

ref::ExactSum reference_sum(const std::vector<Term>& terms) {
  ref::ExactSum sum;
  for (const Term& t : terms) {
    if (t.product)
      sum.add_product(t.a, t.b);
    else
      sum.add(t.a);
  }
  return sum;
}

std::string describe_terms(const Terms& set) {
  std::string text = set.name + " (" + std::to_string(set.terms.size()) + " terms";
  for (size_t i = 0; i < set.terms.size() && i < 4; ++i)
    text += (i ? ", " : ": ") +
            (set.terms[i].product ? show(set.terms[i].a) + " * " + show(set.terms[i].b) : show(set.terms[i].a));
  return text + (set.terms.size() > 4 ? ", ...)" : ")");
}

// The whole comparison for one term set.
void check_sum(const Terms& set) {
  MismatchLog values("superaccumulator " + set.name + ": value(mode) and rounded bits");
  MismatchLog flags("superaccumulator " + set.name + ": flags");
  auto context = [&] { return describe_terms(set); };
  const ref::ExactSum reference = reference_sum(set.terms);
  fp::SuperAccumulator acc;
  if (!guarded(values, context, [&] { feed(acc, set.terms, 0, set.terms.size()); })) {
    values.require_none();
    return;
  }
  compare_exact_every_mode(
      values, flags, context, [&](Mode mode) { return reference.value(mode); },
      [&](Mode mode) { return acc.value(mode); },
      [&](const Format& format, const fp::RoundingOptions& options) { return acc.round(format, options); });
  CHECK(acc.has_nan() == (reference.value(Mode::rne).kind == ref::Kind::nan));

  // Order must not matter: shuffled, split across two merged accumulators, or after clear().
  const fp::ExactValue original = acc.value(Mode::rne);
  std::mt19937_64 rng(set.terms.size());
  for (int variant = 0; variant < 3; ++variant) {
    std::vector<Term> shuffled = set.terms;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    fp::SuperAccumulator other;
    if (variant == 1) {
      other.add(1.0);
      other.clear();
    }
    guarded(values, context, [&] {
      if (variant == 2) {  // split and merge
        fp::SuperAccumulator part;
        const size_t cut = shuffled.size() / 3;
        feed(part, shuffled, 0, cut);
        feed(other, shuffled, cut, shuffled.size());
        other.add(part);
      } else {
        feed(other, shuffled, 0, shuffled.size());
      }
      for (Mode mode : {Mode::rne, Mode::rd}) {
        const std::string d = exact_difference(other.value(mode), reference.value(mode));
        if (d.empty())
          values.pass();
        else
          values.fail(context() + (variant == 2 ? " split+merge" : " shuffled") + " value(" + mode_text(mode) +
                      "): " + d);
      }
      const fp::ExactValue v = other.value(Mode::rne);
      if (v.kind == original.kind && v.significand == original.significand && v.exponent == original.exponent &&
          v.sticky == original.sticky)
        values.pass();
      else
        values.fail(context() + ": shuffled order changed value(rne) from " + show(original) + " to " + show(v));
    });
  }
  values.require_none();
  flags.require_none();
}

double random_wide(std::mt19937_64& rng, int lo_exp, int hi_exp) {
  const int e = std::uniform_int_distribution<int>(lo_exp, hi_exp)(rng);
  const double x = random_significand(rng, e);
  return (rng() & 1) ? -x : x;
}

}  // namespace

TEST_CASE(
    "superaccumulator random normal data: 10, 1000 and 20000 N(0,1) and N(0,1e6) doubles "
    "vs mpfr_sum, rounded to fp64 fp32 tf32 bf16 fp16 e4m3 e5m2 x every mode x flush x "
    "saturate; shuffled and merged",
    "[superaccumulator]") {
  std::mt19937_64 rng(2024);
  std::printf("superaccumulator random: seed 2024\n");
  for (size_t n : {size_t{10}, size_t{1000}, size_t{20000}}) {
    for (double sigma : {1.0, 1e6}) {
      std::normal_distribution<double> normal(0.0, sigma);
      Terms set{"normal n=" + std::to_string(n) + " sigma=" + std::to_string(sigma), {}};
      for (size_t i = 0; i < n; ++i) set.add(normal(rng));
      check_sum(set);
    }
  }
}

TEST_CASE(
    "superaccumulator catastrophic cancellation: x, -x pairs over the whole double range "
    "plus small terms (1e-20, 2^-1074, 3 ulps), shuffled",
    "[superaccumulator]") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    Terms set{"cancellation trial " + std::to_string(trial), {}};
    for (int i = 0; i < 500; ++i) {
      const double x = random_wide(rng, -1000, 1000);
      set.add(x);
      set.add(-x);
    }
    switch (trial % 5) {
      case 0:
        set.add(1e-20);
        break;
      case 1:
        set.add(std::numeric_limits<double>::denorm_min());
        break;
      case 2:
        set.add(3.0);
        set.add(-0x1p-60);
        break;
      case 3:
        set.add(0x1p1000);
        set.add(-0x1p1000);
        set.add(0x1p-1000);
        break;
      default:
        break;  // exact zero: +0 (-0 in rd)
    }
    std::shuffle(set.terms.begin(), set.terms.end(), rng);
    check_sum(set);
  }
}

TEST_CASE(
    "superaccumulator huge dynamic range: 1e-300 .. 1e300 mixed signs, and DBL_MAX with "
    "2^-1074 and near-tie sticky sums",
    "[superaccumulator]") {
  std::mt19937_64 rng(8);
  for (int trial = 0; trial < 10; ++trial) {
    Terms set{"dynamic range trial " + std::to_string(trial), {}};
    for (int i = 0; i < 2000; ++i) set.add(random_wide(rng, -1000, 1000));
    check_sum(set);
  }
  Terms extremes{"DBL_MAX - DBL_MAX + 2^-1074 + 1", {}};
  extremes.add(DBL_MAX);
  extremes.add(std::numeric_limits<double>::denorm_min());
  extremes.add(-DBL_MAX);
  extremes.add(1.0);
  check_sum(extremes);
  // Ties and just-off ties of fp32/bf16/fp16 decided by a far-away term (sticky).
  for (double tail : {0.0, 0x1p-200, -0x1p-200, 0x1p-1074, -0x1p-1074}) {
    for (double half : {0x1p-24, 0x1p-8, 0x1p-11, 0x1p-53}) {
      Terms set{"1 + half-ulp " + show(half) + " + tail " + show(tail), {}};
      set.add(1.0);
      set.add(half);
      set.add(tail);
      check_sum(set);
      Terms odd{"1 + 3 half-ulps " + show(half) + " + tail " + show(tail), {}};
      odd.add(1.0);
      odd.add(3 * half);
      odd.add(tail);
      check_sum(odd);
    }
  }
}

TEST_CASE(
    "superaccumulator subnormal-only inputs: random double subnormals of mixed signs, "
    "and sums that reach the normal range",
    "[superaccumulator]") {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 10; ++trial) {
    Terms set{"subnormal trial " + std::to_string(trial), {}};
    for (int i = 0; i < 1000; ++i) {
      const double x = std::ldexp(static_cast<double>(rng() >> 12), -1074);
      set.add((trial % 2 == 0 || (rng() & 1)) ? x : -x);
    }
    check_sum(set);
  }
}

TEST_CASE(
    "superaccumulator inf and NaN inputs: inf, -inf, inf - inf, NaN, inf * 0, inf * -2, "
    "NaN * 0 among finite terms",
    "[superaccumulator]") {
  const std::vector<std::pair<std::string, std::vector<Term>>> cases = {
      {"1 + inf", {{false, 1, 0}, {false, kInf, 0}}},
      {"-inf + 5", {{false, -kInf, 0}, {false, 5, 0}}},
      {"inf + -inf", {{false, kInf, 0}, {false, -kInf, 0}}},
      {"NaN + 1", {{false, kNaN, 0}, {false, 1, 0}}},
      {"-NaN", {{false, -kNaN, 0}}},
      {"inf * 0", {{true, kInf, 0}, {false, 1, 0}}},
      {"-0 * inf", {{true, -0.0, kInf}}},
      {"inf * -2 + 1e308 * 10", {{true, kInf, -2}, {true, 1e308, 10}}},
      {"inf * 2 + -inf * 3", {{true, kInf, 2}, {true, -kInf, 3}}},
      {"NaN * 0", {{true, kNaN, 0}}},
      {"DBL_MAX * DBL_MAX + inf", {{true, DBL_MAX, DBL_MAX}, {false, kInf, 0}}},
  };
  for (const auto& [name, terms] : cases) check_sum(Terms{name, terms});
}

TEST_CASE(
    "superaccumulator products of doubles: random wide products, underflowing "
    "(1e-200 * 1e-200, 2^-1074 * 2^-1074), overflowing (1e200 * 1e200, DBL_MAX^2) and "
    "overflowing products that cancel to a finite sum",
    "[superaccumulator]") {
  std::mt19937_64 rng(10);
  for (int trial = 0; trial < 10; ++trial) {
    Terms set{"random products trial " + std::to_string(trial), {}};
    for (int i = 0; i < 1000; ++i) set.add_product(random_wide(rng, -1070, 1020), random_wide(rng, -1070, 1020));
    for (int i = 0; i < 100; ++i) set.add(random_wide(rng, -1070, 1020));
    check_sum(set);
  }
  const double tiny = std::numeric_limits<double>::denorm_min();
  const std::vector<std::pair<std::string, std::vector<Term>>> cases = {
      {"1e-200 * 1e-200", {{true, 1e-200, 1e-200}}},
      {"-1e-200 * 1e-200", {{true, -1e-200, 1e-200}}},
      {"2^-1074 * 2^-1074", {{true, tiny, tiny}}},
      {"2^-1074 * -2^-1074 + 2^-1074 * 2^-1074 * 3", {{true, tiny, -tiny}, {true, 3 * tiny, tiny}}},
      {"1e200 * 1e200", {{true, 1e200, 1e200}}},
      {"DBL_MAX * DBL_MAX", {{true, DBL_MAX, DBL_MAX}}},
      {"-DBL_MAX * DBL_MAX", {{true, -DBL_MAX, DBL_MAX}}},
      {"DBL_MAX^2 - DBL_MAX^2 + 1", {{true, DBL_MAX, DBL_MAX}, {true, DBL_MAX, -DBL_MAX}, {false, 1, 0}}},
      {"1e200 * 1e200 - 1e200 * 1e200 + 1e-300 * 1e-10",
       {{true, 1e200, 1e200}, {true, -1e200, 1e200}, {true, 1e-300, 1e-10}}},
      {"(2^53-1)^2", {{true, 0x1.fffffffffffffp0, 0x1.fffffffffffffp0}}},
      {"(2^53-1)^2 * 2^-1100 - small", {{true, 0x1.fffffffffffffp-500, 0x1.fffffffffffffp-600}, {false, -tiny, 0}}},
      {"product tie for fp32", {{true, 1 + 0x1p-12, 1 + 0x1p-12}, {true, -1.0, 0x1p-24}}},
  };
  for (const auto& [name, terms] : cases) check_sum(Terms{name, terms});
  // The top of the accumulator: 10^5 products of 2^2048 need its highest digits and sign.
  Terms top{"100000 x -DBL_MAX^2 + 1", {}};
  for (int i = 0; i < 100000; ++i) top.add_product(-DBL_MAX, DBL_MAX);
  top.add(1.0);
  check_sum(top);
}

TEST_CASE(
    "superaccumulator sums beyond DBL_MAX: DBL_MAX added 1000 times, then cancelled back "
    "to DBL_MAX and below; fp64 rounding overflows per mode",
    "[superaccumulator]") {
  Terms up{"1000 x DBL_MAX", {}};
  for (int i = 0; i < 1000; ++i) up.add(DBL_MAX);
  check_sum(up);
  Terms back{"3 x DBL_MAX - 2 x DBL_MAX - 2^970", {}};
  for (int i = 0; i < 3; ++i) back.add(DBL_MAX);
  for (int i = 0; i < 2; ++i) back.add(-DBL_MAX);
  back.add(-0x1p970);
  check_sum(back);
  Terms edge{"DBL_MAX + half ulp (2^970): rne tie to even -> overflow", {}};
  edge.add(DBL_MAX);
  edge.add(0x1p970);
  check_sum(edge);
  Terms below{"DBL_MAX + half ulp - 2^-1074", {}};
  below.add(DBL_MAX);
  below.add(0x1p970);
  below.add(-std::numeric_limits<double>::denorm_min());
  check_sum(below);
}

TEST_CASE(
    "superaccumulator exact zeros and their signs: no terms, -0, -0 -0, +0 -0, x - x, "
    "-0 + x - x, products -0 * 1, 0 * -1, in every mode",
    "[superaccumulator]") {
  const std::vector<std::pair<std::string, std::vector<Term>>> cases = {
      {"no terms", {}},
      {"-0", {{false, -0.0, 0}}},
      {"+0", {{false, 0.0, 0}}},
      {"-0 + -0", {{false, -0.0, 0}, {false, -0.0, 0}}},
      {"+0 + -0", {{false, 0.0, 0}, {false, -0.0, 0}}},
      {"1 - 1", {{false, 1, 0}, {false, -1, 0}}},
      {"-0 + 1e300 - 1e300", {{false, -0.0, 0}, {false, 1e300, 0}, {false, -1e300, 0}}},
      {"-0 * 1", {{true, -0.0, 1}}},
      {"0 * -1 + -0", {{true, 0.0, -1}, {false, -0.0, 0}}},
      {"0 * 1 + -0", {{true, 0.0, 1}, {false, -0.0, 0}}},
      {"2^-1074 * 2^-1074 - same", {{true, 0x1p-1074, 0x1p-1074}, {true, -0x1p-1074, 0x1p-1074}}},
  };
  for (const auto& [name, terms] : cases) check_sum(Terms{name, terms});
}

TEST_CASE(
    "superaccumulator add_scaled: random 128-bit magnitudes at scales -2176..1984, mixed "
    "with doubles and products, vs the reference",
    "[superaccumulator]") {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    fp::SuperAccumulator acc;
    ref::ExactSum reference;
    MismatchLog log("superaccumulator add_scaled trial " + std::to_string(trial));
    const int lo = trial % 2 ? -2176 : -100, hi = trial % 2 ? 1984 : 100;
    for (int i = 0; i < 300; ++i) {
      const bool negative = rng() & 1;
      // Half the magnitudes fit in 64 bits, half use up to all 128.
      const uint64_t low = (rng() >> (rng() % 64)) | 1, high = i % 2 ? rng() >> (rng() % 64) : 0;
      const unsigned __int128 magnitude = (static_cast<unsigned __int128>(high) << 64) | low;
      const int scale = std::uniform_int_distribution<int>(lo, hi)(rng);
      guarded(
          log,
          [&] { return "add_scaled(" + show_bits(high) + ":" + show_bits(low) + ", " + std::to_string(scale) + ")"; },
          [&] { acc.add_scaled(negative, magnitude, scale); });
      reference.add_scaled(negative, low, scale);
      if (high != 0) reference.add_scaled(negative, high, scale + 64);
      const double x = random_wide(rng, -1000, 1000);
      acc.add(x);
      reference.add(x);
    }
    for (Mode mode : {Mode::rne, Mode::rd}) {
      const std::string d = exact_difference(acc.value(mode), reference.value(mode));
      if (d.empty())
        log.pass();
      else
        log.fail("value(" + mode_text(mode) + "): " + d);
      for (const Format& format : output_formats()) {
        const auto want = ref::round(reference.value(mode), format, mode, false, false);
        const fp::Rounded got = acc.round(format, {mode, false, false, nullptr});
        if (got.bits == want[0].bits)
          log.pass();
        else
          log.fail(format.name + " " + mode_text(mode) + ": expected bits " + show_bits(want[0].bits) + ", got " +
                   show_bits(got.bits));
      }
    }
    log.require_none();
  }
  fp::SuperAccumulator acc;
  CHECK_THROWS(acc.add_scaled(false, 1, -3000));
  CHECK_THROWS(acc.add_scaled(true, 1, 3000));
}

// ---------------------------------------------------------------------------------------------
// Carry propagation runs every 2^30 adds: cross that boundary with digits at their largest.

TEST_CASE(
    "superaccumulator carry: 2^30 + 5 adds of the all-ones double (2^53-1) * 2^k, and "
    "2^30 + 5 products of all-ones significands, equal the exact multiple",
    "[carry]") {
  const uint64_t n = (uint64_t{1} << 30) + 5;
  for (int k : {-1074, 0, 970}) {
    const double x = std::ldexp(static_cast<double>((uint64_t{1} << 53) - 1), k - 52);
    fp::SuperAccumulator acc;
    for (uint64_t i = 0; i < n; ++i) acc.add(x);
    ref::Real want(128);
    mpfr_set_d(want.get(), x, MPFR_RNDN);
    mpfr_mul_ui(want.get(), want.get(), n, MPFR_RNDN);  // exact in 128 bits
    ref::Exact exact;
    exact.kind = ref::Kind::finite;
    exact.value = want;
    INFO("sum of " << n << " x " << show(x));
    CHECK(exact_difference(acc.value(Mode::rne), exact).empty());
    INFO(exact_difference(acc.value(Mode::rne), exact));
  }
  {
    const double a = 0x1.fffffffffffffp-1;  // (2^53-1) * 2^-53
    fp::SuperAccumulator acc;
    for (uint64_t i = 0; i < n; ++i) acc.add_product(-a, a);
    ref::Real want(200);
    mpfr_set_d(want.get(), a, MPFR_RNDN);
    mpfr_sqr(want.get(), want.get(), MPFR_RNDN);
    mpfr_mul_ui(want.get(), want.get(), n, MPFR_RNDN);
    mpfr_neg(want.get(), want.get(), MPFR_RNDN);
    ref::Exact exact;
    exact.kind = ref::Kind::finite;
    exact.negative = true;
    exact.value = want;
    const std::string d = exact_difference(acc.value(Mode::rne), exact);
    INFO("sum of " << n << " products -(2^53-1)^2 * 2^-106: " << d);
    CHECK(d.empty());
  }
}

TEST_CASE(
    "superaccumulator carry: merging two accumulators that each hold 2^30 - 1 "
    "unpropagated adds of the all-ones double, then adding more",
    "[carry]") {
  const uint64_t n = (uint64_t{1} << 30) - 1;
  const double x = std::ldexp(static_cast<double>((uint64_t{1} << 53) - 1), 100);
  fp::SuperAccumulator a, b;
  for (uint64_t i = 0; i < n; ++i) a.add(x);
  b = a;
  a.add(b);
  for (int i = 0; i < 10; ++i) a.add(x);
  ref::Real want(128);
  mpfr_set_d(want.get(), x, MPFR_RNDN);
  mpfr_mul_ui(want.get(), want.get(), 2 * n + 10, MPFR_RNDN);
  ref::Exact exact;
  exact.kind = ref::Kind::finite;
  exact.value = want;
  const std::string d = exact_difference(a.value(Mode::rne), exact);
  INFO(d);
  CHECK(d.empty());
}

TEST_CASE("superaccumulator decimal_text: every digit of the exact sum, read back exactly by MPFR") {
  auto text_of = [](std::initializer_list<double> terms) {
    fplab::fp::SuperAccumulator acc;
    for (double t : terms) acc.add(t);
    return acc.decimal_text();
  };
  CHECK(text_of({0.1}) == "0.1000000000000000055511151231257827021181583404541015625");
  CHECK(text_of({1, 2, 4.5}) == "7.5");
  CHECK(text_of({-0.375}) == "-0.375");
  CHECK(text_of({1e8, 1, -1e8, 1}) == "2");
  CHECK(text_of({}) == "0");
  CHECK(text_of({-0.0}) == "-0");
  CHECK(text_of({1.0, -1.0}) == "0");
  CHECK(text_of({INFINITY, 1}) == "inf");
  CHECK(text_of({-INFINITY}) == "-inf");
  CHECK(text_of({INFINITY, -INFINITY}) == "nan");
  const std::string tiny = text_of({std::ldexp(1.0, -1074)});  // 5^1074 / 10^1074
  CHECK(tiny.size() == 2 + 1074);
  CHECK(tiny.starts_with("0.000"));
  CHECK(tiny.ends_with("625"));
  CHECK(text_of({DBL_MAX, DBL_MAX}).size() == 309);  // 2 * DBL_MAX: an integer of 309 digits

  // Random wide-range sums: the text, read by MPFR at a precision that holds every bit of the
  // accumulator, is exactly the sum MPFR computes.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> mantissa(-1, 1);
  std::uniform_int_distribution<int> exponent(-1070, 1000);
  for (int trial = 0; trial < 200; ++trial) {
    fplab::fp::SuperAccumulator acc;
    mpfr_t sum, term, read;
    mpfr_inits2(4500, sum, term, read, static_cast<mpfr_ptr>(nullptr));
    mpfr_set_zero(sum, 1);
    for (int i = 0; i < 1 + trial % 7; ++i) {
      const double t = std::ldexp(mantissa(rng), exponent(rng));
      acc.add(t);
      mpfr_set_d(term, t, MPFR_RNDN);
      REQUIRE(mpfr_add(sum, sum, term, MPFR_RNDN) == 0);
    }
    const std::string text = acc.decimal_text();
    char* end = nullptr;
    REQUIRE(mpfr_strtofr(read, text.c_str(), &end, 10, MPFR_RNDN) == 0);  // ternary 0: read exactly
    REQUIRE(*end == '\0');
    CHECK(mpfr_equal_p(read, sum) != 0);
    mpfr_clears(sum, term, read, static_cast<mpfr_ptr>(nullptr));
  }
}
