// Regime: exact dot products of fp32 vectors. exact_dot() against the MPFR exact sum of the
// products (fp/mpfr_reference.hpp): the ExactValue for every mode, and the once-rounded result
// in fp64 fp32 tf32 bf16 fp16 e4m3 e5m2 x every mode x flush x saturate. Lengths 0, 1, not a
// multiple of 4, up to 2*10^5 with every product in one exponent bucket (the bucket-overflow
// path), subnormal floats, exact cancellation to zero, inf and NaN.
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include <catch2/catch.hpp>

#include "fp/exact_dot.hpp"
#include "harness.hpp"

using namespace fplab::test;
namespace fp = fplab::fp;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

void check_dot(const std::string& name, const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  const size_t n = a.size();
  MismatchLog values("exact_dot " + name + ": value(mode) and rounded bits");
  MismatchLog flags("exact_dot " + name + ": flags");
  auto context = [&] {
    std::string text = name + " (n = " + std::to_string(n);
    for (size_t i = 0; i < n && i < 3; ++i) text += (i ? ", " : ": ") + show(a[i]) + " * " + show(b[i]);
    return text + (n > 3 ? ", ...)" : ")");
  };
  compare_exact_every_mode(
      values, flags, context, [&](Mode mode) { return ref::exact_dot(a.data(), b.data(), n, mode); },
      [&](Mode mode) { return fp::exact_dot(a.data(), b.data(), n, mode); },
      [&](const Format& format, const fp::RoundingOptions& options) {
        return fp::exact_dot(a.data(), b.data(), n, format, options);
      });
  values.require_none();
  flags.require_none();
}

float random_float(std::mt19937_64& rng, int lo_exp, int hi_exp) {
  const int e = std::uniform_int_distribution<int>(lo_exp, hi_exp)(rng);
  const uint32_t m = static_cast<uint32_t>(rng() >> 40) | (1u << 23);  // 24-bit significand
  const float x = std::ldexp(static_cast<float>(m), e - 23);
  return (rng() & 1) ? -x : x;
}

float random_subnormal_float(std::mt19937_64& rng) {
  const float x = std::ldexp(static_cast<float>(rng() >> 41), -149);  // 23 random bits
  return (rng() & 1) ? -x : x;
}

}  // namespace

TEST_CASE(
    "exact_dot random fp32 vectors: n = 0..17, 31, 33, 100, 1000, 10003, 100000; normal "
    "and wide-exponent floats vs MPFR, every mode and output format",
    "[exact_dot]") {
  std::mt19937_64 rng(99);
  std::printf("exact_dot random: seed 99\n");
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 17; ++n) lengths.push_back(n);
  for (size_t n : {31, 33, 100, 1000, 10003, 100000}) lengths.push_back(n);
  for (size_t n : lengths) {
    for (int kind = 0; kind < 2; ++kind) {
      std::vector<float> a(n), b(n);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (size_t i = 0; i < n; ++i) {
        a[i] = kind == 0 ? normal(rng) : random_float(rng, -126, 127);
        b[i] = kind == 0 ? normal(rng) : random_float(rng, -126, 127);
      }
      check_dot((kind == 0 ? "normal n=" : "wide n=") + std::to_string(n), a, b);
    }
  }
}

TEST_CASE(
    "exact_dot one exponent bucket: n = 10^6, 200000 and 65537 positive products of "
    "near-all-ones 24-bit significands at one exponent (near 1, 2^200, 2^-290), then with "
    "mixed signs; 10^6 such products overflow a 64-bit bucket of 8 lanes never flushed",
    "[exact_dot]") {
  std::mt19937_64 rng(100);
  for (size_t n : {size_t{1000000}, size_t{200000}, size_t{65537}}) {
    for (int e : {0, 100, -145}) {
      if (n == 1000000 && e != 0) continue;  // one exponent is enough at this length
      for (bool mixed : {false, true}) {
        std::vector<float> a(n), b(n);
        for (size_t i = 0; i < n; ++i) {
          // All-ones-heavy significands push every bucket word as high as it can go.
          const uint32_t ma = (1u << 24) - 1 - static_cast<uint32_t>(rng() % 16);
          const uint32_t mb = (1u << 24) - 1 - static_cast<uint32_t>(rng() % 16);
          a[i] = std::ldexp(static_cast<float>(ma), e - 23);
          b[i] = std::ldexp(static_cast<float>(mb), (e == -145 ? -145 : e) - 23);
          if (mixed && (rng() & 1)) a[i] = -a[i];
        }
        check_dot("one bucket n=" + std::to_string(n) + " exponent " + std::to_string(e) +
                      (mixed ? " mixed signs" : " positive"),
                  a, b);
      }
    }
  }
  std::vector<float> big(200000, FLT_MAX), tiny(200000, std::numeric_limits<float>::denorm_min());
  check_dot("FLT_MAX^2 x 200000", big, big);
  check_dot("denorm_min^2 x 200000", tiny, tiny);
  std::vector<float> neg = big;
  for (size_t i = 0; i < neg.size(); i += 2) neg[i] = -neg[i];
  check_dot("FLT_MAX * +-FLT_MAX x 200000 (cancels to 0)", big, neg);
}

TEST_CASE(
    "exact_dot subnormal floats: subnormal x subnormal, subnormal x normal, mixed with "
    "large products, n = 1..4097",
    "[exact_dot]") {
  std::mt19937_64 rng(101);
  for (size_t n : {size_t{1}, size_t{5}, size_t{64}, size_t{4097}}) {
    std::vector<float> a(n), b(n), c(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = random_subnormal_float(rng);
      b[i] = random_subnormal_float(rng);
      c[i] = (i % 7 == 0) ? random_float(rng, 60, 127) : random_float(rng, -126, 0);
    }
    check_dot("subnormal*subnormal n=" + std::to_string(n), a, b);
    check_dot("subnormal*mixed n=" + std::to_string(n), a, c);
  }
}

TEST_CASE(
    "exact_dot exact zeros and specials: n=0, +-0 products, x*y - x*y, inf*0, inf*2, "
    "inf*2 + -inf*3, NaN anywhere, inf among 10^4 finite terms",
    "[exact_dot]") {
  check_dot("n=0", {}, {});
  check_dot("-0 * 1", {-0.0f}, {1.0f});
  check_dot("-0 * 1 + 0 * -1", {-0.0f, 0.0f}, {1.0f, -1.0f});
  check_dot("0 * 1 + -0 * 1", {0.0f, -0.0f}, {1.0f, 1.0f});
  check_dot("3 * 5 - 3 * 5", {3.0f, -3.0f}, {5.0f, 5.0f});
  check_dot("-0*2 + 3*5 - 3*5", {-0.0f, 3.0f, -3.0f}, {2.0f, 5.0f, 5.0f});
  check_dot("inf * 0", {kInf}, {0.0f});
  check_dot("inf * 2", {kInf}, {2.0f});
  check_dot("1*1 + -inf * 2", {1.0f, -kInf}, {1.0f, 2.0f});
  check_dot("inf*2 + -inf*3", {kInf, -kInf}, {2.0f, 3.0f});
  check_dot("NaN * 1 + 1 * 1", {kNaN, 1.0f}, {1.0f, 1.0f});
  check_dot("1 * NaN", {1.0f}, {kNaN});
  std::mt19937_64 rng(102);
  std::vector<float> a(10000), b(10000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = random_float(rng, -20, 20), b[i] = random_float(rng, -20, 20);
  b[7777] = kInf;
  check_dot("inf among 10^4 finite", a, b);
  b[7777] = -kInf;
  a[123] = 0.0f;
  b[123] = kInf;
  check_dot("-inf and inf*0 among 10^4 finite", a, b);
}
