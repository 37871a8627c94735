// Regime: exhaustive rounding of the small formats. For every value of the format, every
// midpoint between neighbouring values (and between 0 and the least subnormal, and between max
// finite and the grid points above it), the doubles just above and below each midpoint, the
// quarter points, and a few values far beyond max finite — both signs, every mode, flush and
// saturate on and off — fp::round_double must agree with the MPFR reference bit for bit
// (stochastic rounding: the result must be one of the two neighbours).
#include <cmath>
#include <limits>

#include <catch2/catch.hpp>

#include "fp/counter_rng.hpp"
#include "fp/round.hpp"
#include "harness.hpp"

using namespace fplab::test;
namespace fp = fplab::fp;

namespace {

// Positive test points for a format, ascending roughly; NaN and infinity at the end.
std::vector<double> test_points(const Format& format) {
  const ref::Grid grid(format);
  const std::vector<double> values = ref::nonnegative_values(format);
  std::vector<double> points;
  auto interval = [&](double a, double b) {
    const double mid = a + (b - a) / 2;
    points.push_back(mid);
    points.push_back(std::nextafter(mid, 0.0));
    points.push_back(std::nextafter(mid, INFINITY));
    points.push_back(a + (b - a) / 4);
    points.push_back(a + 3 * (b - a) / 4);
  };
  for (size_t i = 0; i < values.size(); ++i) {
    points.push_back(values[i]);
    if (i + 1 < values.size()) interval(values[i], values[i + 1]);
  }
  // Above max finite the grid goes on with the top binade's spacing, then doubles it.
  const double max = grid.max_finite();
  const double top_ulp = std::ldexp(1.0, static_cast<int>(grid.top_quantum));
  double a = max;
  for (int step = 0; step < 4 && std::isfinite(a); ++step) {
    const double ulp = a >= std::ldexp(1.0, grid.emax + 1) ? 2 * top_ulp : top_ulp;
    const double b = a + ulp;
    if (!std::isfinite(b)) break;
    interval(a, b);
    points.push_back(b);
    a = b;
  }
  for (double far : {2 * max, 3.75 * max, 1e300, std::numeric_limits<double>::max(),
                     std::numeric_limits<double>::denorm_min(), grid.min_subnormal() / 1024})
    if (std::isfinite(far)) points.push_back(far);
  // Below the least magnitude: where e8m0, which has no zero, must say what it gives (the
  // midpoint 0.75 and its neighbours decide the nearest modes against the grid's 2^-128).
  const double least = grid.min_subnormal();
  for (double below : {0.75 * least, std::nextafter(0.75 * least, 0.0), std::nextafter(0.75 * least, INFINITY),
                       0.5 * least, 0.375 * least, 0.25 * least})
    points.push_back(below);
  points.push_back(0.0);
  points.push_back(std::numeric_limits<double>::infinity());
  points.push_back(std::numeric_limits<double>::quiet_NaN());
  return points;
}

void exhaustive_rounding(const Format& format) {
  const ref::Grid grid(format);
  const std::vector<double> points = test_points(format);
  MismatchLog values("round " + format.name + " exhaustive: values and bits");
  MismatchLog flags("round " + format.name + " exhaustive: inexact/overflow/underflow flags");
  fp::CounterRng stream(0x5eed);
  for (double magnitude : points) {
    for (double x : {magnitude, -magnitude}) {
      const ref::Position pos = ref::locate(x, grid);
      const bool finite_nonzero = std::isfinite(x) && x != 0;
      for_each_rounding([&](Mode mode, bool flush, bool saturate) {
        fp::RoundingOptions options;
        options.mode = mode;
        options.flush_subnormals = flush;
        options.saturate = saturate;
        options.stream = &stream;
        const auto want = ref::round(pos, grid, mode, flush, saturate);
        guarded(
            values, [&] { return configuration(format, mode, flush, saturate) + " x = " + show(x); },
            [&] {
              const fp::Rounded got = fp::round_double(x, format, options);
              compare_rounded(
                  values, flags, [&] { return show(x); }, format, mode, flush, saturate, got, want, finite_nonzero);
            });
      });
    }
  }
  values.require_none();
  flags.require_none();
}

}  // namespace

TEST_CASE(
    "round e4m3 (OCP FN) exhaustive: every value, midpoint, near-midpoint, quarter point "
    "and beyond-max value, both signs x every mode x flush x saturate agrees with MPFR",
    "[e4m3]") {
  exhaustive_rounding(format_named("e4m3"));
}

TEST_CASE(
    "round e5m2 exhaustive: every value, midpoint, near-midpoint, quarter point and "
    "beyond-max value, both signs x every mode x flush x saturate agrees with MPFR",
    "[e5m2]") {
  exhaustive_rounding(format_named("e5m2"));
}

TEST_CASE(
    "round custom e2m1 e3m2 e2m3 e3m2fn e5m2fn e6m1 exhaustive: every value, midpoint, "
    "near-midpoint and beyond-max value x every mode x flush x saturate agrees with MPFR",
    "[custom]") {
  for (const Format& f : {custom_format(2, 1, false), custom_format(3, 2, false), custom_format(2, 3, false),
                          custom_format(3, 2, true), custom_format(5, 2, true), custom_format(6, 1, false)})
    exhaustive_rounding(f);
}

TEST_CASE(
    "round ML formats exhaustive: e4m3ieee e4m3fnuz e5m2fnuz e4m3b11fnuz e3m2fn e2m3fn e2m1fn e8m0: "
    "every value, midpoint, near-midpoint, quarter point, beyond-max and below-least value, zero, "
    "inf and NaN, both signs x every mode x flush x saturate agrees with MPFR",
    "[ml-formats]") {
  for (const Format& f : narrow_ml_formats()) exhaustive_rounding(f);
}

TEST_CASE(
    "round ML formats: documented behaviour at the edges (fnuz has no -0 and one NaN, MX FP4 "
    "saturates and has no NaN, e8m0 has no zero and no negative values)",
    "[ml-formats]") {
  auto r = [](double x, const char* name, Mode m = Mode::rne, bool sat = false) {
    fp::RoundingOptions o;
    o.mode = m;
    o.saturate = sat;
    return fp::round_double(x, format_named(name), o);
  };
  // fnuz: a negative value that rounds to zero is +0; -0 itself becomes +0; NaN is 0x80.
  CHECK(r(-0x1p-20, "e4m3fnuz").bits == 0x00);
  CHECK_FALSE(std::signbit(r(-0x1p-20, "e4m3fnuz").value));
  CHECK(r(-0.0, "e5m2fnuz").bits == 0x00);
  CHECK(r(-NAN, "e4m3b11fnuz").bits == 0x80);
  CHECK(r(1e6, "e5m2fnuz").bits == 0x80);  // overflow: NaN, no infinity
  CHECK(r(1e6, "e5m2fnuz", Mode::rne, true).bits == 0x7f);
  CHECK(r(INFINITY, "e4m3fnuz").bits == 0x80);
  CHECK(r(247, "e4m3fnuz").value == 240);
  CHECK(r(248, "e4m3fnuz").bits == 0x80);  // the tie with 256 goes to 256's even significand: overflow
  // MX FP4: 7 is the tie between 6 (1.1b x 4, odd) and 8: overflow, which saturates to 6.
  CHECK(r(7, "e2m1fn").value == 6);
  CHECK(r(7, "e2m1fn").overflow);
  CHECK(r(INFINITY, "e2m1fn").value == 6);
  CHECK(r(-INFINITY, "e2m3fn").value == -7.5);
  CHECK(r(NAN, "e3m2fn").value == 0);
  CHECK(r(NAN, "e3m2fn").bits == 0);
  CHECK(r(-NAN, "e3m2fn").bits == 0x20);
  CHECK(r(-0.0, "e2m1fn").bits == 0x8);
  // e8m0: powers of two; 1.5 ties to 2 (even at 2^0's spacing); zero, negatives and values
  // below 2^-127 that round down have no value: NaN (0xff), or 2^-127 when saturating.
  CHECK(r(1.5, "e8m0").value == 2);
  CHECK(r(1.5, "e8m0", Mode::rz).value == 1);
  CHECK(r(0.0, "e8m0").bits == 0xff);
  CHECK(r(0.0, "e8m0", Mode::rne, true).bits == 0x00);
  CHECK(r(-4, "e8m0").bits == 0xff);
  CHECK(r(0x1.8p-129, "e8m0", Mode::ru).bits == 0x00);  // ru: the least value at or above x
  CHECK(r(0x1.8p-129, "e8m0").bits == 0xff);
  CHECK(r(0x1.8p-129, "e8m0").underflow);
  CHECK(r(0x1.8p-127, "e8m0").value == 0x1p-126);
  CHECK(r(0x1.7p-128, "e8m0").bits == 0xff);  // nearer 2^-128 than 2^-127: underflow
  CHECK(r(0x1p128, "e8m0").bits == 0xff);
  CHECK(r(0x1p128, "e8m0", Mode::rz).bits == 0xfe);
  // e4m3ieee: IEEE-like, so 240 is max and 248 (the tie with 256) overflows to infinity.
  CHECK(r(240, "e4m3ieee").bits == 0x77);
  CHECK(std::isinf(r(248, "e4m3ieee").value));
}

TEST_CASE(
    "round fp16 exhaustive: every value, midpoint, near-midpoint, quarter point and "
    "beyond-max value, both signs x every mode x flush x saturate agrees with MPFR",
    "[fp16]") {
  exhaustive_rounding(format_named("fp16"));
}

TEST_CASE(
    "round bf16 exhaustive: every value, midpoint, near-midpoint, quarter point and "
    "beyond-max value, both signs x every mode x flush x saturate agrees with MPFR",
    "[bf16]") {
  exhaustive_rounding(format_named("bf16"));
}
