// Regime: random rounding. 10^6 seeded random doubles per format (a mix of uniform bit
// patterns, values across and just outside the format's range, its subnormal range, its
// midpoints and the doubles next to them, its own values) rounded to fp32, tf32, fp16, bf16,
// e4m3 and e5m2 in every mode, flush and saturate on and off, against the MPFR reference.
// Then random ExactValues (64-bit significand + sticky, exponents beyond the double range)
// through round_exact into every format, fp64 included.
#include <bit>
#include <cmath>
#include <cstdio>
#include <random>

#include <catch2/catch.hpp>

#include "fp/counter_rng.hpp"
#include "fp/exact_value.hpp"
#include "fp/round.hpp"
#include "harness.hpp"

using namespace fplab::test;
namespace fp = fplab::fp;

namespace {

constexpr uint64_t kSeed = 0x0123456789abcdefULL;
constexpr int kSamplesPerFormat = 1000000;

// One random input for `grid`, from a mix aimed at the places where rounding goes wrong.
double random_input(std::mt19937_64& rng, const ref::Grid& g) {
  const int p = g.precision;
  auto uniform_int = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  // A random grid point M * 2^q of the unbounded-above grid (one binade past emax allowed).
  auto grid_point = [&](uint64_t& integer, int& quantum) {
    quantum = static_cast<int>(uniform_int(g.subnormal_quantum, g.top_quantum + 1));
    const uint64_t half = uint64_t{1} << (p - 1);
    integer = quantum == g.subnormal_quantum ? uniform_int(0, 2 * half - 1) : uniform_int(half, 2 * half - 1);
  };
  double x = 0;
  switch (rng() % 10) {
    case 0:
      x = random_finite_bits(rng);
      break;
    case 1:
    case 2:  // anywhere in and around the range, random low bits
      x = random_significand(rng, static_cast<int>(uniform_int(g.emin - p - 3, g.emax + 2)));
      break;
    case 3: {  // the subnormal range (and just above it), fully random low bits
      const double scale = std::ldexp(1.0, g.emin - 53);
      x = static_cast<double>(rng() >> (11 + uniform_int(0, 12))) * scale;
      break;
    }
    case 4:
    case 5:
    case 6: {  // a midpoint, or a few doubles away from one
      uint64_t integer;
      int quantum;
      grid_point(integer, quantum);
      x = std::ldexp(static_cast<double>(integer) + 0.5, quantum);
      for (int64_t steps = uniform_int(-3, 3); steps != 0; steps += steps > 0 ? -1 : 1)
        x = std::nextafter(x, steps > 0 ? INFINITY : 0.0);
      break;
    }
    case 7: {  // a grid point
      uint64_t integer;
      int quantum;
      grid_point(integer, quantum);
      x = std::ldexp(static_cast<double>(integer), quantum);
      break;
    }
    case 8: {  // near max finite and the overflow threshold
      const double top_ulp = std::ldexp(1.0, static_cast<int>(g.top_quantum));
      x = g.max_finite() + top_ulp * (static_cast<double>(uniform_int(-64, 64)) / 16.0);
      break;
    }
    default: {  // near 2^emin and the least subnormal
      const double base = (rng() & 1) ? g.min_normal() : g.min_subnormal();
      x = base * (1 + static_cast<double>(uniform_int(-1024, 1024)) / 1024.0);
      break;
    }
  }
  return (rng() & 1) ? -x : x;
}

void random_rounding(const Format& format) {
  std::printf("round %s random: seed 0x%llx, %d samples\n", format.name.c_str(), static_cast<unsigned long long>(kSeed),
              kSamplesPerFormat);
  std::mt19937_64 rng(kSeed ^ std::hash<std::string>{}(format.name));
  const ref::Grid grid(format);
  MismatchLog values("round " + format.name + " random: values and bits");
  MismatchLog flags("round " + format.name + " random: flags");
  fp::CounterRng stream(17);
  for (int i = 0; i < kSamplesPerFormat; ++i) {
    const double x = random_input(rng, grid);
    const ref::Position pos = ref::locate(x, grid);
    for_each_rounding([&](Mode mode, bool flush, bool saturate) {
      fp::RoundingOptions options{mode, flush, saturate, &stream};
      const auto want = ref::round(pos, grid, mode, flush, saturate);
      guarded(
          values, [&] { return configuration(format, mode, flush, saturate) + " x = " + show(x); },
          [&] {
            compare_rounded(
                values, flags, [&] { return show(x); }, format, mode, flush, saturate,
                fp::round_double(x, format, options), want, x != 0);
          });
    });
  }
  values.require_none();
  flags.require_none();
}

}  // namespace

TEST_CASE(
    "round fp32 random: 10^6 seeded doubles (uniform bits, range, subnormal, "
    "near-midpoint, near-max) x every mode x flush x saturate agree with MPFR",
    "[fp32]") {
  random_rounding(format_named("fp32"));
}

TEST_CASE(
    "round tf32 random: 10^6 seeded doubles (uniform bits, range, subnormal, "
    "near-midpoint, near-max) x every mode x flush x saturate agree with MPFR",
    "[tf32]") {
  random_rounding(format_named("tf32"));
}

TEST_CASE(
    "round fp16 random: 10^6 seeded doubles (uniform bits, range, subnormal, "
    "near-midpoint, near-max) x every mode x flush x saturate agree with MPFR",
    "[fp16]") {
  random_rounding(format_named("fp16"));
}

TEST_CASE(
    "round bf16 random: 10^6 seeded doubles (uniform bits, range, subnormal, "
    "near-midpoint, near-max) x every mode x flush x saturate agree with MPFR",
    "[bf16]") {
  random_rounding(format_named("bf16"));
}

TEST_CASE(
    "round e4m3 random: 10^6 seeded doubles (uniform bits, range, subnormal, "
    "near-midpoint, near-max) x every mode x flush x saturate agree with MPFR",
    "[e4m3]") {
  random_rounding(format_named("e4m3"));
}

TEST_CASE(
    "round e5m2 random: 10^6 seeded doubles (uniform bits, range, subnormal, "
    "near-midpoint, near-max) x every mode x flush x saturate agree with MPFR",
    "[e5m2]") {
  random_rounding(format_named("e5m2"));
}

// ---------------------------------------------------------------------------------------------

namespace {

// The reference value of an ExactValue: significand * 2^(exponent - 63), plus, when sticky, a
// tail strictly between 0 and the last place (its size cannot change a rounding to <= 53 bits
// except stochastically).
ref::Real reference_of(const fp::ExactValue& v) {
  ref::Real r(128);
  mpfr_set_uj(r.get(), v.significand, MPFR_RNDN);
  if (v.sticky) {
    mpfr_mul_2si(r.get(), r.get(), 1, MPFR_RNDN);
    mpfr_add_ui(r.get(), r.get(), 1, MPFR_RNDN);  // + 1/2 of the last place
    mpfr_mul_2si(r.get(), r.get(), -1, MPFR_RNDN);
  }
  mpfr_mul_2si(r.get(), r.get(), static_cast<long>(v.exponent - 63), MPFR_RNDN);
  if (v.negative) mpfr_neg(r.get(), r.get(), MPFR_RNDN);
  return r;
}

}  // namespace

TEST_CASE(
    "round_exact exact_value random: 64-bit significand + sticky at exponents -2200..2200, "
    "incl. exact ties and tie +- sticky, into fp64 fp32 tf32 bf16 fp16 e4m3 e5m2 x every "
    "mode x flush x saturate agree with MPFR",
    "[exact_value]") {
  std::printf("round_exact random: seed 0x%llx\n", static_cast<unsigned long long>(kSeed));
  std::mt19937_64 rng(kSeed);
  fp::CounterRng stream(99);
  for (const Format& format : output_formats()) {
    const ref::Grid grid(format);
    MismatchLog values("round_exact " + format.name + " random: values and bits");
    MismatchLog flags("round_exact " + format.name + " random: flags");
    for (int i = 0; i < 60000; ++i) {
      fp::ExactValue v;
      v.kind = fp::ExactValue::Kind::finite;
      v.negative = rng() & 1;
      v.significand = rng() | (uint64_t{1} << 63);
      v.sticky = rng() & 1;
      switch (i % 4) {
        case 0:
          v.exponent = std::uniform_int_distribution<int64_t>(-2200, 2200)(rng);
          break;
        default:
          v.exponent = std::uniform_int_distribution<int64_t>(grid.emin - grid.precision - 3, grid.emax + 2)(rng);
      }
      if (i % 3 == 0) {  // the dropped bits form an exact tie (before sticky)
        const int64_t quantum = std::max<int64_t>(v.exponent, grid.emin) - (grid.precision - 1);
        const int64_t dropped = quantum - (v.exponent - 63);
        if (dropped >= 1 && dropped <= 63) {
          v.significand &= ~((uint64_t{1} << dropped) - 1);
          v.significand |= uint64_t{1} << (dropped - 1);
          if (rng() & 1) v.significand -= 1, v.sticky = true;  // just below the tie
        }
      }
      const ref::Real exact = reference_of(v);
      const ref::Position pos = ref::locate(exact.get(), grid);
      for_each_rounding([&](Mode mode, bool flush, bool saturate) {
        fp::RoundingOptions options{mode, flush, saturate, &stream};
        const auto want = ref::round(pos, grid, mode, flush, saturate);
        guarded(
            values, [&] { return configuration(format, mode, flush, saturate) + " " + show(v); },
            [&] {
              compare_rounded(
                  values, flags, [&] { return show(v); }, format, mode, flush, saturate,
                  fp::round_exact(v, format, options), want, true);
            });
      });
    }
    values.require_none();
    flags.require_none();
  }
}

TEST_CASE(
    "exact_value from_double and from_integer: fields describe the exact value for random "
    "doubles (all ranges, subnormals) and random integer * 2^scale",
    "[exact_value]") {
  std::mt19937_64 rng(kSeed + 1);
  MismatchLog log("ExactValue::from_double / from_integer");
  for (int i = 0; i < 200000; ++i) {
    double x = random_finite_bits(rng);
    if (i % 5 == 0) x = std::ldexp(static_cast<double>(rng() >> 12), -1074);  // subnormal
    if (i == 0) x = -0.0;
    if (i == 1) x = INFINITY;
    if (i == 2) x = -INFINITY;
    if (i == 3) x = NAN;
    ref::Exact want;
    const ref::Real rx = ref::Real::from_double(x);
    want.kind = std::isnan(x)   ? ref::Kind::nan
                : std::isinf(x) ? ref::Kind::infinite
                : x == 0        ? ref::Kind::zero
                                : ref::Kind::finite;
    want.negative = std::signbit(x);
    if (want.kind == ref::Kind::finite) want.value = rx;
    guarded(
        log, [&] { return "from_double " + show(x); },
        [&] {
          const std::string d = exact_difference(fp::ExactValue::from_double(x), want);
          if (d.empty())
            log.pass();
          else
            log.fail("from_double(" + show(x) + "): " + d);
        });
  }
  for (int i = 0; i < 200000; ++i) {
    const bool negative = rng() & 1;
    uint64_t magnitude = rng() >> std::uniform_int_distribution<int>(0, 63)(rng);
    if (magnitude == 0) magnitude = 1;
    const int64_t scale = std::uniform_int_distribution<int64_t>(-2300, 2300)(rng);
    // A sticky tail is only meaningful below the last place of a full 64-bit magnitude.
    const bool sticky = (magnitude >> 63) && (rng() & 1);
    fp::ExactValue got;
    const std::string context = "from_integer(" + std::to_string(negative) + ", " + show_bits(magnitude) + ", " +
                                std::to_string(scale) + ", " + std::to_string(sticky) + ")";
    if (!guarded(
            log, [&] { return context; },
            [&] { got = fp::ExactValue::from_integer(negative, magnitude, scale, sticky); }))
      continue;
    ref::Exact want;
    want.kind = ref::Kind::finite;
    want.negative = negative;
    ref::Real r(64);
    mpfr_set_uj(r.get(), magnitude, MPFR_RNDN);
    mpfr_mul_2si(r.get(), r.get(), static_cast<long>(scale), MPFR_RNDN);
    if (negative) mpfr_neg(r.get(), r.get(), MPFR_RNDN);
    if (sticky) {  // add a tail below the last place
      ref::Real tail(64);
      mpfr_set_ui_2exp(tail.get(), 1, static_cast<long>(scale - 1), MPFR_RNDN);
      if (negative) mpfr_neg(tail.get(), tail.get(), MPFR_RNDN);
      ref::Real sum(130);
      mpfr_add(sum.get(), r.get(), tail.get(), MPFR_RNDN);
      r = sum;
    }
    want.value = r;
    const std::string d = exact_difference(got, want);
    if (d.empty())
      log.pass();
    else
      log.fail(context + ": " + d);
  }
  log.require_none();
}

TEST_CASE(
    "saturation policies: saturate keeps +-inf inputs where the format has infinities, "
    "saturate_infinities turns them into +-max in every mode; finite results and NaN as "
    "saturate alone gives them",
    "[rounding]") {
  std::mt19937_64 rng(0x5a7);
  for (const char* name : {"fp16", "bf16", "e5m2", "e4m3ieee", "fp32", "e4m3", "e4m3fnuz", "e2m1fn"}) {
    const Format format = format_named(name);
    for (Mode mode : fp::all_modes) {
      fp::CounterRng stream(1), same(1);
      fp::RoundingOptions finite{mode, false, true, &stream}, all{mode, false, true, &same};
      all.saturate_infinities = true;
      INFO(name << " mode " << fp::mode_name(mode));
      for (bool negative : {false, true}) {
        const double inf = negative ? -INFINITY : INFINITY;
        const fp::Rounded a = fp::round_double(inf, format, all);
        CHECK(a.bits == ref::max_finite_bits(format, negative));
        CHECK(a.inexact);
        const fp::Rounded f = fp::round_double(inf, format, finite);
        CHECK(f.bits == ref::round(inf, format, mode, false, true)[0].bits);
        const fp::Rounded nan = fp::round_double(std::copysign(NAN, inf), format, all);
        CHECK(std::isnan(nan.value) == format.has_nan());
      }
      // Everything finite rounds as with saturate alone (the same draws in sr).
      for (int i = 0; i < 2000; ++i) {
        const double x = (rng() & 1 ? -1.0 : 1.0) * std::ldexp(random_significand(rng, 0), static_cast<int>(rng() % 300) - 150);
        CHECK(fp::round_double(x, format, all).bits == fp::round_double(x, format, finite).bits);
      }
    }
  }
}
