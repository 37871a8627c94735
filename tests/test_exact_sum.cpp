// Regime: fast exact sums of doubles and floats (fp::exact_sum_of, the exponent-bucket pass)
// against the MPFR exact sum (fp/mpfr_reference.hpp's ExactSum): the ExactValue for every mode,
// and the once-rounded result in fp64 fp32 tf32 bf16 fp16 e4m3 e5m2 x every mode x flush x
// saturate. Lengths around the few-terms threshold and up to 3*10^5, strides 1 and 3, normal,
// wide-exponent and subnormal terms, one exponent bucket filled past a flush, bucket words half
// full at a check and then filled, cancellation to zero with either zero sign, inf and NaN.
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include <catch2/catch.hpp>

#include "fp/exact_sum.hpp"
#include "harness.hpp"

using namespace fplab::test;
namespace fp = fplab::fp;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Checks every step-th element of x (as T) against MPFR.
template <class T>
void check_sum(const std::string& name, const std::vector<T>& x, size_t step = 1) {
  const size_t n = (x.size() + step - 1) / step;
  MismatchLog values("exact_sum_of " + name + ": value(mode) and rounded bits");
  MismatchLog flags("exact_sum_of " + name + ": flags");
  auto context = [&] {
    std::string text = name + " (n = " + std::to_string(n) + ", step " + std::to_string(step);
    for (size_t i = 0; i < n && i < 3; ++i) text += (i ? ", " : ": ") + show(static_cast<double>(x[i * step]));
    return text + (n > 3 ? ", ...)" : ")");
  };
  ref::ExactSum reference;
  for (size_t i = 0; i < n; ++i) reference.add(static_cast<double>(x[i * step]));
  compare_exact_every_mode(
      values, flags, context, [&](Mode mode) { return reference.value(mode); },
      [&](Mode mode) { return fp::exact_sum_of(x.data(), n, step, mode); },
      [&](const Format& format, const fp::RoundingOptions& options) {
        return fp::exact_sum_of(x.data(), n, step, format, options);
      });
  values.require_none();
  flags.require_none();
}

double random_double(std::mt19937_64& rng, int lo_exp, int hi_exp) {
  const int e = std::uniform_int_distribution<int>(lo_exp, hi_exp)(rng);
  const uint64_t m = (rng() >> 11) | (uint64_t{1} << 52);  // 53-bit significand
  const double x = std::ldexp(static_cast<double>(m), e - 52);
  return (rng() & 1) ? -x : x;
}

double random_subnormal_double(std::mt19937_64& rng) {
  const double x = std::ldexp(static_cast<double>(rng() >> 12), -1074);  // 52 random bits
  return (rng() & 1) ? -x : x;
}

}  // namespace

TEST_CASE(
    "exact_sum_of random doubles: n = 0..40, 100, 1000, 10003, 100000; normal, wide-exponent "
    "(2^-1022..2^1023) and subnormal-heavy terms, strides 1 and 3, vs MPFR",
    "[exact_sum]") {
  std::mt19937_64 rng(199);
  std::printf("exact_sum_of random: seed 199\n");
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 40; ++n) lengths.push_back(n);
  for (size_t n : {100, 1000, 10003, 100000}) lengths.push_back(n);
  for (size_t n : lengths) {
    for (int kind = 0; kind < 3; ++kind) {
      for (size_t step : {size_t{1}, size_t{3}}) {
        if (step == 3 && n > 1000) continue;
        std::vector<double> x(n * step);
        std::normal_distribution<double> normal(0.0, 1.0);
        for (auto& v : x) {
          if (kind == 0)
            v = normal(rng);
          else if (kind == 1)
            v = random_double(rng, -1022, 1023);
          else
            v = (rng() % 4 == 0) ? random_double(rng, -1022, -1000) : random_subnormal_double(rng);
        }
        const char* what = kind == 0 ? "normal" : kind == 1 ? "wide" : "subnormal";
        check_sum(std::string(what) + " n=" + std::to_string(n), x, step);
      }
    }
  }
}

TEST_CASE(
    "exact_sum_of random floats: n = 31..33, 1000, 100000; normal, wide and subnormal floats, "
    "strides 1 and 2, vs MPFR",
    "[exact_sum]") {
  std::mt19937_64 rng(200);
  for (size_t n : {31, 32, 33, 1000, 100000}) {
    for (size_t step : {size_t{1}, size_t{2}}) {
      std::vector<float> x(n * step);
      for (size_t i = 0; i < x.size(); ++i) {
        const double v = random_double(rng, -149, 127);
        x[i] = (i % 3 == 0) ? static_cast<float>(std::ldexp(1.0 * (rng() >> 41), -149)) : static_cast<float>(v);
      }
      check_sum("floats n=" + std::to_string(n), x, step);
    }
  }
}

TEST_CASE(
    "exact_sum_of one exponent bucket: 300000 and 16385 near-all-ones significands at one "
    "exponent (near 1, 2^1000, subnormal), positive then mixed signs: more than one word can "
    "take, so the buckets must flush in time",
    "[exact_sum]") {
  std::mt19937_64 rng(201);
  for (size_t n : {size_t{300000}, size_t{16385}}) {
    for (int e : {0, 1000, -1074}) {
      for (bool mixed : {false, true}) {
        std::vector<double> x(n);
        for (auto& v : x) {
          const uint64_t m = (uint64_t{1} << 53) - 1 - (rng() % 16);
          v = e == -1074 ? std::ldexp(static_cast<double>(m >> 1), -1074) : std::ldexp(static_cast<double>(m), e - 52);
          if (mixed && (rng() & 1)) v = -v;
        }
        check_sum("one bucket n=" + std::to_string(n) + " exponent " + std::to_string(e) +
                      (mixed ? " mixed signs" : " positive"),
                  x);
      }
    }
  }
  std::vector<double> big(40000, DBL_MAX);
  check_sum("DBL_MAX x 40000", big);
  for (size_t i = 0; i < big.size(); i += 2) big[i] = -big[i];
  check_sum("+-DBL_MAX x 40000 (cancels to 0)", big);
}

TEST_CASE("exact_sum_of bucket words half full at a check, then the largest significands", "[exact_sum]") {
  // For checks every 4096 .. 32768 terms: that many terms (half 1, half 4), then twice as many
  // 2 - 2^-52, positive and negative. However often the pass checks its words, one check sees
  // every word at 2^62 or below and lets the next stretch of largest significands land on top;
  // a word that took more terms between checks than fits above 2^63 wraps.
  for (size_t check : {size_t{4096}, size_t{8192}, size_t{16384}, size_t{32768}}) {
    for (double sign : {1.0, -1.0}) {
      std::vector<double> x(3 * check);
      for (size_t i = 0; i < check; ++i) x[i] = sign * (i < check / 2 ? 1.0 : 4.0);
      for (size_t i = check; i < x.size(); ++i) x[i] = sign * (2.0 - std::ldexp(1.0, -52));
      check_sum("half-full words, then the largest significands, check " + std::to_string(check) +
                    (sign < 0 ? " negative" : " positive"),
                x);
    }
  }
}

TEST_CASE(
    "exact_sum_of zeros and specials: all +0, all -0, mixed zeros, x - x with -0s among 100 "
    "terms, inf, -inf, inf - inf, NaN among 10^4 finite terms",
    "[exact_sum]") {
  check_sum("n=0", std::vector<double>{});
  check_sum("100 x +0", std::vector<double>(100, 0.0));
  check_sum("100 x -0", std::vector<double>(100, -0.0));
  std::vector<double> zeros(100, -0.0);
  zeros[50] = 0.0;
  check_sum("99 x -0 and +0", zeros);
  std::vector<double> cancel(100, -0.0);
  cancel[10] = 3.5, cancel[90] = -3.5;
  check_sum("-0s with 3.5 - 3.5", cancel);
  std::mt19937_64 rng(202);
  std::vector<double> x(10000);
  for (auto& v : x) v = random_double(rng, -30, 30);
  for (double special : {kInf, -kInf, kNaN}) {
    auto y = x;
    y[7777] = special;
    check_sum("special among 10^4 finite", y);
  }
  auto y = x;
  y[10] = kInf, y[20] = -kInf;
  check_sum("inf - inf among 10^4 finite", y);
}

TEST_CASE(
    "exact_sum_of chunks of 1024 that take 2 and 3 extraction levels (floats: 1), mixed with chunks "
    "for the buckets (wide, or from 2^1012), streaks of wide chunks, one sign, ties, vs MPFR",
    "[exact_sum]") {
  // The extraction path (fp/extracted_sum.hpp) takes a chunk of doubles whose exponents span up
  // to 30 binades in two levels, up to 71 in three; wider ones, and terms from 2^1012 up (top
  // 1011 and 1012 below), go to the buckets. Chunks alternate between kinds so that the buckets'
  // runs are both short (copied) and long.
  std::mt19937_64 rng(203);
  std::printf("exact_sum_of extraction: seed 203\n");
  const auto chunk = [&](std::vector<double>& x, int top, int span) {
    for (int k = 0; k < 1024; ++k) x.push_back(random_double(rng, top - span, top));
  };
  for (int span : {0, 30, 60, 70, 100, 110, 130, 200}) {
    for (int top : {0, 900, 1011, 1012, -980, -1060}) {
      std::vector<double> x;
      chunk(x, top, span);
      chunk(x, top - 5, span / 2);
      for (int w = 0; w < 20; ++w) chunk(x, 300, 600);  // a streak of wide chunks: some go unread
      chunk(x, top, span);
      for (int k = 0; k < 517; ++k) x.push_back(random_double(rng, top - span, top));  // a short tail
      check_sum("extraction span " + std::to_string(span) + " top " + std::to_string(top), x);
    }
  }
  // Terms of one sign in [2^(top - 1), 2^top): a chunk's extracted parts sum to about
  // 1.5 * 2^(top + 9), exact only while that stays below sigma (2^(top + 11)) on their grid (2^-53
  // sigma for negative terms, twice that for positive ones): a sigma 4 times smaller rounds the
  // negative chunks' sums, 8 times smaller the positive ones'.
  for (int top : {0, 700, -1000}) {
    for (double sign : {1.0, -1.0}) {
      std::vector<double> same_sign;
      for (int k = 0; k < 4096; ++k) same_sign.push_back(sign * std::fabs(random_double(rng, top - 1, top - 1)));
      check_sum("one sign near " + std::string(sign < 0 ? "-" : "") + "2^" + std::to_string(top), same_sign);
    }
  }
  // Bits spread so that each level leaves a remainder for the next, one level beyond three
  std::vector<double> stairs(1024, 0.0);
  stairs[0] = 0.5 + std::ldexp(1.0, -42);
  stairs[1] = std::ldexp(1.0, -31) + 3 * std::ldexp(1.0, -83);
  stairs[2] = std::ldexp(1.0, -72) + std::ldexp(1.0, -124);
  check_sum("a remainder at every level", stairs);
  // Subnormals below 2^-1042, whose high 32 bits are zero (the extraction's exponent pass reads
  // only those): chunks of them alone and among normal terms.
  std::vector<double> tiny;
  for (int k = 0; k < 3000; ++k)
    tiny.push_back(std::ldexp(static_cast<double>(rng() >> 44), -1074) * ((rng() & 1) ? -1 : 1));
  check_sum("subnormals below 2^-1042", tiny);
  for (size_t k = 1024; k < 2048; ++k) tiny[k] = random_double(rng, -10, 10);
  check_sum("subnormals below 2^-1042 and a chunk of normal terms", tiny);
  // Terms on sigma's half-ulp grid (ties when added to sigma): 2^e times odd multiples of 2^-53.
  std::vector<double> ties;
  for (int k = 0; k < 5000; ++k)
    ties.push_back(std::ldexp(static_cast<double>(2 * (rng() % 1024) + 1), -53 + static_cast<int>(rng() % 12)) *
                   ((rng() & 1) ? -1 : 1));
  check_sum("ties", ties);
  // Wide streaks that narrow later: the rechecked chunks find the narrow ones.
  std::vector<double> narrowing;
  for (int w = 0; w < 40; ++w) chunk(narrowing, 0, 600);
  for (int w = 0; w < 40; ++w) chunk(narrowing, 0, 20);
  check_sum("wide then narrow", narrowing);
  // Floats take the same path converted.
  std::vector<float> floats;
  for (int k = 0; k < 70000; ++k)
    floats.push_back(static_cast<float>(random_double(rng, -60 + (k / 1024 % 3) * 40, 40)));
  check_sum("floats in chunks of spans 100, 60, 20", floats);
}
