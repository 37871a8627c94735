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
