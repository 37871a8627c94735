// Regime: correctly rounded add, mul and fma in every format and mode. Operands are any doubles
// (format values or not): random bits, values around each format's range and its subnormals,
// near-cancelling pairs, products landing in the subnormal range, sums beyond DBL_MAX, signed
// zeros, inf and NaN. The MPFR reference computes the exact result and rounds it once. Also
// exact_sum / exact_product against the exact value.
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include <catch2/catch.hpp>

#include "fp/arithmetic.hpp"
#include "fp/counter_rng.hpp"
#include "fp/exact_value.hpp"
#include "harness.hpp"
#include "same_bits.hpp"

using namespace fplab::test;
namespace fp = fplab::fp;

namespace {

constexpr uint64_t kSeed = 0xa11ce;
constexpr int kTriplesPerFormat = 25000;

// One operand for arithmetic targeted at `grid`.
double operand(std::mt19937_64& rng, const ref::Grid& g) {
  auto uniform_int = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  double x;
  switch (rng() % 12) {
    case 0:
      x = random_finite_bits(rng);
      break;
    case 1: {  // a value of the format
      const int e = uniform_int(g.emin, g.emax);
      const uint64_t m = (rng() >> (64 - g.man_bits)) | (uint64_t{1} << g.man_bits);
      x = std::ldexp(static_cast<double>(m), e - g.man_bits);
      if (x > g.max_finite()) x = g.max_finite();
      break;
    }
    case 2:
      x = random_significand(rng, uniform_int(g.emin - g.precision - 2, g.emax + 1));
      break;
    case 3:
      x = random_significand(rng, uniform_int(g.emin / 2 - 2, g.emin / 2 + 2));
      break;  // products near emin
    case 4:
      x = random_significand(rng, uniform_int(1010, 1023));
      break;  // sums beyond DBL_MAX
    case 5:
      x = std::ldexp(static_cast<double>(rng() >> 12), -1074);
      break;  // double subnormals
    case 6:
      x = (rng() & 1) ? 0.0 : -0.0;
      break;
    case 7:
      x = rng() % 8 == 0 ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
      break;
    case 8:
      x = std::ldexp(1.0, uniform_int(g.emin - g.precision, g.emax + 1));
      break;
    case 9:
      x = DBL_MAX;
      break;
    default:
      x = random_significand(rng, uniform_int(-30, 30));
      break;
  }
  return (rng() & 1) ? -x : x;
}

void arithmetic_against_reference(const Format& format) {
  std::printf("arithmetic %s: seed 0x%llx, %d operand triples\n", format.name.c_str(),
              static_cast<unsigned long long>(kSeed), kTriplesPerFormat);
  std::mt19937_64 rng(kSeed ^ std::hash<std::string>{}(format.name));
  const ref::Grid grid(format);
  MismatchLog log("add/mul/fma " + format.name);
  fp::CounterRng stream(3);
  for (int i = 0; i < kTriplesPerFormat; ++i) {
    double a = operand(rng, grid), b = operand(rng, grid), c = operand(rng, grid);
    switch (i % 6) {
      case 0:
        b = -a;
        break;  // exact cancellation
      case 1:
        b = -std::nextafter(a, 0.0);
        break;  // near cancellation
      case 2:
        c = -a * b;
        break;  // fma: product minus its rounding
      case 3:
        b = std::ldexp(1.0, grid.emin) / (a == 0 ? 1 : a);
        break;  // product near 2^emin
      default:
        break;
    }
    struct Op {
      const char* name;
      std::function<ref::Exact(Mode)> exact;
      std::function<double(const fp::RoundingOptions&)> got;
    };
    const Op ops[] = {
        {"add", [&](Mode m) { return ref::exact_add(a, b, m); },
         [&](const fp::RoundingOptions& o) { return fp::add(a, b, format, o); }},
        {"mul", [&](Mode m) { return ref::exact_mul(a, b, m); },
         [&](const fp::RoundingOptions& o) { return fp::mul(a, b, format, o); }},
        {"fma", [&](Mode m) { return ref::exact_fma(a, b, c, m); },
         [&](const fp::RoundingOptions& o) { return fp::fma(a, b, c, format, o); }},
    };
    for (const Op& op : ops) {
      const ref::Exact exact_rne = op.exact(Mode::rne), exact_rd = op.exact(Mode::rd);
      auto input = [&] {
        return std::string(op.name) + "(" + show(a) + ", " + show(b) +
               (op.name[0] == 'f' ? ", " + show(c) : std::string()) + ")";
      };
      for_each_rounding([&](Mode mode, bool flush, bool saturate) {
        const ref::Exact& exact = mode == Mode::rd ? exact_rd : exact_rne;
        const auto want = ref::round(exact, format, mode, flush, saturate);
        fp::RoundingOptions options{mode, flush, saturate, &stream};
        guarded(log, input, [&] { compare_double(log, input, format, mode, flush, saturate, op.got(options), want); });
      });
    }
  }
  log.require_none();
}

}  // namespace

TEST_CASE(
    "arithmetic fp64 add mul fma: 25000 random operand triples x every mode x flush x "
    "saturate agree with MPFR (incl. sums beyond DBL_MAX, subnormal results)",
    "[arithmetic]") {
  arithmetic_against_reference(format_named("fp64"));
}

TEST_CASE(
    "arithmetic fp32 tf32 add mul fma: 25000 random operand triples x every mode x flush "
    "x saturate agree with MPFR",
    "[arithmetic]") {
  arithmetic_against_reference(format_named("fp32"));
  arithmetic_against_reference(format_named("tf32"));
}

TEST_CASE(
    "arithmetic fp16 bf16 add mul fma: 25000 random operand triples x every mode x flush "
    "x saturate agree with MPFR",
    "[arithmetic]") {
  arithmetic_against_reference(format_named("fp16"));
  arithmetic_against_reference(format_named("bf16"));
}

TEST_CASE(
    "arithmetic e4m3 e5m2 add mul fma: 25000 random operand triples x every mode x flush "
    "x saturate agree with MPFR",
    "[arithmetic]") {
  arithmetic_against_reference(format_named("e4m3"));
  arithmetic_against_reference(format_named("e5m2"));
}

TEST_CASE(
    "arithmetic other families and widths add mul fma: e4m3fnuz e5m2fnuz e2m1fn e3m2fn e4m3ieee "
    "e8m0 and eXmY of 21, 51 and 52 bits (either side of the fast path's limit), 25000 triples "
    "each x every mode x flush x saturate agree with MPFR",
    "[arithmetic]") {
  for (const char* name : {"e4m3fnuz", "e5m2fnuz", "e2m1fn", "e3m2fn", "e4m3ieee", "e8m0"})
    arithmetic_against_reference(format_named(name));
  // Plain eXmY (IEEE-like), as fp::parse_format reads them.
  for (const char* name : {"e6m20", "e9m50", "e9m51"}) arithmetic_against_reference(fp::parse_format(name));
}

TEST_CASE(
    "arithmetic add_each == add lane by lane, bit for bit: 15 formats (both sides of the fast "
    "paths' limits: fp32 stands in for e8m22, not e8m23 or e9m20) x every mode x flush x saturate, 4000 lanes of "
    "mixed operands (cancellation, overflow, subnormal results, specials), sr drawing from per-lane streams",
    "[arithmetic]") {
  const char* names[] = {"fp64",   "fp32", "tf32",  "bf16",  "fp16",  "e4m3",  "e5m2", "e4m3fnuz",
                         "e2m1fn", "e8m0", "e9m50", "e9m51", "e8m22", "e6m20", "e9m20"};
  for (const char* name : names) {
    const Format format = fp::parse_format(name);
    const ref::Grid grid(format);
    std::mt19937_64 rng(kSeed ^ 0xeac4);
    constexpr size_t n = 4000;
    std::vector<double> acc(n), x(n);
    for (size_t i = 0; i < n; ++i) {
      acc[i] = operand(rng, grid);
      x[i] = operand(rng, grid);
      if (i % 5 == 0) x[i] = -acc[i];                                       // exact cancellation
      if (i % 5 == 1) x[i] = -std::nextafter(acc[i], 0.0);                  // near cancellation
      if (i % 5 == 2) acc[i] = std::ldexp(std::nearbyint(acc[i] * 8), -3);  // format-like values
    }
    MismatchLog log(std::string("add_each ") + name);
    for_each_rounding([&](Mode mode, bool flush, bool saturate) {
      std::vector<fp::CounterRng> lane_streams, one_streams;
      for (size_t i = 0; i < n; ++i) lane_streams.emplace_back(i), one_streams.emplace_back(i);
      std::vector<double> got = acc;
      fp::add_each(got.data(), x.data(), n, format, {mode, flush, saturate, nullptr}, lane_streams.data());
      for (size_t i = 0; i < n; ++i) {
        const double want = fp::add(acc[i], x[i], format, {mode, flush, saturate, &one_streams[i]});
        if (same_bits(got[i], want))
          log.pass();
        else
          log.fail(std::string(name) + " " + configuration(format, mode, flush, saturate) + " add_each(" +
                   show(acc[i]) + ", " + show(x[i]) + ") = " + show(got[i]) + ", add = " + show(want));
      }
    });
    log.require_none();
  }
}

TEST_CASE(
    "arithmetic add_each of floats whose fp32 sum lands on a midpoint of the format, decided by the sum's error "
    "(above, below, a tie), rne and rna, both signs, bf16, fp16 and e4m3, on their subnormal grids too",
    "[arithmetic]") {
  // fp::Fp32Cut::sum: the fp32 sum of two floats rounded to fp32 lands on a midpoint of the
  // format; the exact sum lies above it, below it, or on it.
  struct Case {
    const char* format;
    float a, b;
    double rne, rna;
  };
  const float bf16_mid = 1.0f + 0x1p-8f, fp16_mid = 1.0f + 0x1p-11f, fp16_sub_mid = 0x1.8p-24f;
  const Case cases[] = {
      {"bf16", bf16_mid, -0x1p-40f, 1.0, 1.0},                       // below: toward zero
      {"bf16", bf16_mid, 0x1p-40f, 1.0 + 0x1p-7, 1.0 + 0x1p-7},      // above: away
      {"bf16", bf16_mid, 0.0f, 1.0, 1.0 + 0x1p-7},                   // a tie: even / away
      {"bf16", -bf16_mid, 0x1p-40f, -1.0, -1.0},                     // the same, negative
      {"bf16", -bf16_mid, -0x1p-40f, -1.0 - 0x1p-7, -1.0 - 0x1p-7},  //
      {"bf16", 1.0f + 0x3p-8f, 0.0f, 1.0 + 0x1p-6, 1.0 + 0x1p-6},    // a tie whose even is up
      {"fp16", fp16_mid, -0x1p-40f, 1.0, 1.0},                       // scaled, exactly
      {"fp16", fp16_mid, 0x1p-40f, 1.0 + 0x1p-10, 1.0 + 0x1p-10},    //
      {"fp16", fp16_mid, 0.0f, 1.0, 1.0 + 0x1p-10},                  //
      {"fp16", fp16_sub_mid, 0x1p-60f, 0x1p-23, 0x1p-23},            // onto a midpoint of the subnormal grid
      {"fp16", fp16_sub_mid, -0x1p-60f, 0x1p-24, 0x1p-24},           //
      {"fp16", fp16_sub_mid, 0.0f, 0x1p-23, 0x1p-23},                // a subnormal tie: even is up
      {"fp16", -fp16_sub_mid, -0x1p-60f, -0x1p-23, -0x1p-23},        // the same, negative
      {"fp16", -fp16_sub_mid, 0x1p-60f, -0x1p-24, -0x1p-24},         //
      {"fp16", 0x1.4p-23f, 0.0f, 0x1p-23, 0x1.8p-23},                // a subnormal tie whose even is down
      {"fp16", 0x1p-26f, -0x1p-40f, 0.0, 0.0},                       // toward zero from a quarter of u
      {"fp16", -0x1p-25f, 0x1p-40f, -0.0, -0.0},                     // below half of u, negative: -0
      {"fp16", 0x1.ffcp-15f, 0x1p-40f, 0x1p-14, 0x1p-14},            // just past the top midpoint: the least normal
      {"fp16", 0x1.ffcp-15f, -0x1p-40f, 0x1.ff8p-15, 0x1.ff8p-15},   // ... just under it
      {"fp16", 0x1.ffcp-15f, 0.0f, 0x1p-14, 0x1p-14},                // ... on it: the least normal is even
      {"e4m3", 0x1.ep-7f, 0x1p-40f, 0x1p-6, 0x1p-6},                 // e4m3's top midpoint
      {"e4m3", 0x1.ep-7f, -0x1p-40f, 0x1.cp-7, 0x1.cp-7},            //
      {"e4m3", 0x1.8p-9f, 0x1p-50f, 0x1p-8, 0x1p-8},                 // e4m3's subnormal grid (u = 2^-9)
      {"e4m3", 0x1.8p-9f, -0x1p-50f, 0x1p-9, 0x1p-9},                //
      {"e4m3", 0x1.8p-9f, 0.0f, 0x1p-8, 0x1p-8},                     //
      {"e4m3", 0x1.4p-8f, 0.0f, 0x1p-8, 0x1.8p-8},                   // 5u / 2: even is 2u
  };
  for (const Case& c : cases)
    for (const fp::Mode mode : {fp::Mode::rne, fp::Mode::rna}) {
      const fp::Format format = fp::parse_format(c.format);
      double acc = c.a;
      const double x = c.b;
      fp::add_each(&acc, &x, 1, format, {mode}, nullptr);
      INFO(c.format << " " << (mode == fp::Mode::rne ? "rne" : "rna") << " " << c.a << " + " << c.b);
      CHECK(same_bits(acc, mode == fp::Mode::rne ? c.rne : c.rna));
      CHECK(same_bits(acc, fp::add(c.a, c.b, format, {mode})));
    }
}

TEST_CASE("arithmetic formats with a bias of 0 (least normal 2): add_each == add, the fp32 cut declines them",
          "[arithmetic]") {
  for (const char* name : {"e4m3b0", "e2m1b0", "e4m3b0fn", "e3m2b1"}) {
    const fp::Format format = fp::parse_format(name);
    const double want = fp::add(2.0, 2.0, format, {fp::Mode::rne});
    double acc = 2.0;
    const double x = 2.0;
    fp::add_each(&acc, &x, 1, format, {fp::Mode::rne}, nullptr);
    INFO(name);
    CHECK(want == 4.0);
    CHECK(same_bits(acc, want));
  }
}

TEST_CASE(
    "arithmetic fixed cases: DBL_MAX + DBL_MAX, fma(DBL_MAX, 2, -DBL_MAX), "
    "fma(inf, 0, 1), fma(1e200, 1e200, -inf), (-0) + (-0), 1 - 1 in rd, tiny products",
    "[arithmetic]") {
  MismatchLog log("add/mul/fma fixed cases");
  const double inf = std::numeric_limits<double>::infinity();
  struct Fixed {
    const char* op;
    double a, b, c;
  };
  const Fixed cases[] = {
      {"add", DBL_MAX, DBL_MAX, 0},
      {"add", -DBL_MAX, -0x1p970, 0},
      {"add", -0.0, -0.0, 0},
      {"add", 1.0, -1.0, 0},
      {"add", -0.0, 0.0, 0},
      {"add", inf, -inf, 0},
      {"mul", 1e-200, 1e-200, 0},
      {"mul", -1e-200, 1e-200, 0},
      {"mul", 1e200, -1e200, 0},
      {"mul", inf, 0.0, 0},
      {"mul", -0.0, 5.0, 0},
      {"fma", DBL_MAX, 2.0, -DBL_MAX},
      {"fma", inf, 0.0, 1.0},
      {"fma", 1e200, 1e200, -inf},
      {"fma", 1.0, -0.0, 0.0},
      {"fma", -1.0, 0.0, -0.0},
      {"fma", 1e-200, 1e-200, -0.0},
      {"fma", 1 + 0x1p-30, 1 - 0x1p-30, -1.0},
      {"fma", 0x1p-600, 0x1p-600, 0x1p-1074},
  };
  fp::CounterRng stream(4);
  for (const Format& format : output_formats()) {
    for (const Fixed& f : cases) {
      auto input = [&] {
        return std::string(f.op) + "(" + show(f.a) + ", " + show(f.b) +
               (f.op[0] == 'f' ? ", " + show(f.c) : std::string()) + ")";
      };
      for_each_rounding([&](Mode mode, bool flush, bool saturate) {
        const std::string op = f.op;
        const ref::Exact exact = op == "add"   ? ref::exact_add(f.a, f.b, mode)
                                 : op == "mul" ? ref::exact_mul(f.a, f.b, mode)
                                               : ref::exact_fma(f.a, f.b, f.c, mode);
        const auto want = ref::round(exact, format, mode, flush, saturate);
        fp::RoundingOptions options{mode, flush, saturate, &stream};
        guarded(log, input, [&] {
          const double got = op == "add"   ? fp::add(f.a, f.b, format, options)
                             : op == "mul" ? fp::mul(f.a, f.b, format, options)
                                           : fp::fma(f.a, f.b, f.c, format, options);
          // Signed zeros matter here: compare the sign too.
          compare_double(log, input, format, mode, flush, saturate, got, want);
          if (got == 0 && want.size() == 1 && std::signbit(got) != std::signbit(want[0].value))
            log.fail(configuration(format, mode, flush, saturate) + " " + input() + ": zero of the wrong sign");
        });
      });
    }
  }
  log.require_none();
}

TEST_CASE(
    "arithmetic exact_sum and exact_product: ExactValue describes the exact a + b and "
    "a * b for 200000 random double pairs (every range, cancellation, specials), rne and rd",
    "[arithmetic]") {
  std::mt19937_64 rng(kSeed);
  const ref::Grid wide(format_named("fp64"));
  MismatchLog log("exact_sum / exact_product");
  for (int i = 0; i < 200000; ++i) {
    const double a = operand(rng, wide);
    double b = operand(rng, wide);
    if (i % 4 == 0) b = -std::nextafter(a, (rng() & 1) ? INFINITY : -INFINITY);
    if (i % 4 == 1) b = -a;
    auto input = [&] { return show(a) + ", " + show(b); };
    for (Mode mode : {Mode::rne, Mode::rd}) {
      guarded(log, input, [&] {
        const std::string d = exact_difference(fp::exact_sum(a, b, mode), ref::exact_add(a, b, mode));
        if (d.empty())
          log.pass();
        else
          log.fail("exact_sum(" + input() + ", " + mode_text(mode) + "): " + d);
      });
    }
    guarded(log, input, [&] {
      const std::string d = exact_difference(fp::exact_product(a, b), ref::exact_mul(a, b, Mode::rne));
      if (d.empty())
        log.pass();
      else
        log.fail("exact_product(" + input() + "): " + d);
    });
  }
  log.require_none();
}

namespace {

// sum_rounded_to_fp32(p, q) against MPFR's p + q rounded once to fp32, to nearest even.
void check_sum_rounded_to_fp32(MismatchLog& log, double p, double q) {
  auto input = [&] { return show(p) + ", " + show(q); };
  guarded(log, input, [&] {
    const float got = fp::sum_rounded_to_fp32(p, q);
    const auto want = ref::round(ref::exact_add(p, q, Mode::rne), fp::fp32(), Mode::rne, false, false);
    const bool same = (std::isnan(got) && std::isnan(want[0].value)) ||
                      std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(static_cast<float>(want[0].value));
    if (same)
      log.pass();
    else
      log.fail("sum_rounded_to_fp32(" + input() + ") = " + show(got) + ", MPFR " + show(want[0].value));
  });
}

}  // namespace

TEST_CASE(
    "arithmetic sum_rounded_to_fp32: the exact p + q rounded once to fp32 (nearest even) "
    "for 300000 double pairs: every range, fp32 midpoints nudged by tiny terms, overflow, "
    "specials",
    "[arithmetic]") {
  std::mt19937_64 rng(kSeed + 32);
  const ref::Grid wide(format_named("fp64")), single(format_named("fp32"));
  MismatchLog log("sum_rounded_to_fp32");
  for (int i = 0; i < 300000; ++i) {
    double p = operand(rng, (i % 2) ? single : wide), q = operand(rng, (i % 3) ? single : wide);
    if (i % 5 == 0) {
      // p on an fp32 midpoint (halfway between neighbours), q far below it: the case where a
      // plain double sum followed by a conversion rounds twice.
      const float f = static_cast<float>(operand(rng, single));
      if (std::isfinite(f)) p = (static_cast<double>(f) + static_cast<double>(std::nextafter(f, INFINITY))) / 2;
      q = std::ldexp((rng() & 1) ? 1.0 : -1.0, std::ilogb(p) - 40 - static_cast<int>(rng() % 30));
    }
    if (i % 7 == 0) q = -std::nextafter(p, (rng() & 1) ? INFINITY : -INFINITY);  // cancellation
    check_sum_rounded_to_fp32(log, p, q);
  }
  constexpr double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (double special : {inf, -inf, nan, 0.0, -0.0, DBL_MAX, -DBL_MAX})
    for (double other : {1.0, -1.0, inf, -inf, 0.0, -0.0, DBL_MAX}) check_sum_rounded_to_fp32(log, special, other);
  log.require_none();
}
