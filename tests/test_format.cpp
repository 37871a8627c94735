// Regime: format properties, names, bit patterns (exhaustive for every format of at most 16
// bits), and a self-check of the MPFR reference against the host's IEEE hardware.
#include <bit>
#include <cfenv>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>

#include <catch2/catch.hpp>

#include "fp/format.hpp"
#include "fp/rounding.hpp"
#include "harness.hpp"

using namespace fplab::test;
namespace fp = fplab::fp;

namespace {

void check_fields(const Format& got, const Format& want) {
  INFO("format " << want.name);
  CHECK(got.exp_bits == want.exp_bits);
  CHECK(got.man_bits == want.man_bits);
  CHECK(got.family == want.family);
  CHECK(got.bias_shift == want.bias_shift);
}

}  // namespace

TEST_CASE(
    "format named constructors fp64 fp32 tf32 bf16 fp16 e4m3 e5m2: fields, emin, emax, "
    "max_finite, min_normal, min_subnormal agree with the reference grid",
    "[format]") {
  const std::pair<Format, const char*> named[] = {{fp::fp64(), "fp64"}, {fp::fp32(), "fp32"}, {fp::tf32(), "tf32"},
                                                  {fp::bf16(), "bf16"}, {fp::fp16(), "fp16"}, {fp::e4m3(), "e4m3"},
                                                  {fp::e5m2(), "e5m2"}};
  for (const auto& [got, name] : named) {
    const Format want = format_named(name);
    check_fields(got, want);
    const ref::Grid grid(want);
    INFO("format " << name);
    CHECK(got.emin() == grid.emin);
    CHECK(got.emax() == grid.emax);
    CHECK(got.precision() == grid.precision);
    CHECK(same_double(got.max_finite(), grid.max_finite()));
    CHECK(same_double(got.min_normal(), grid.min_normal()));
    CHECK(same_double(got.min_subnormal(), grid.min_subnormal()));
  }
}

TEST_CASE(
    "format documented facts: e4m3 max 448, e5m2 max 57344, fp16 max 65504, bf16 max "
    "0x1.fep127, fp32 FLT_MAX, fp64 DBL_MAX, and their bit patterns",
    "[format]") {
  // These hold for both the reference and fp/.
  for (const auto& [name, max] : {std::pair<const char*, double>{"e4m3", 448.0},
                                  {"e5m2", 57344.0},
                                  {"fp16", 65504.0},
                                  {"bf16", 0x1.fep127},
                                  {"tf32", 0x1.ffcp127},
                                  {"fp32", double(FLT_MAX)},
                                  {"fp64", DBL_MAX}}) {
    INFO("format " << name);
    CHECK(ref::Grid(format_named(name)).max_finite() == max);
    CHECK(fp::parse_format(name).max_finite() == max);
  }
  CHECK(fp::bf16().encode(1.0) == 0x3f80);
  CHECK(ref::encode(1.0, format_named("bf16")) == 0x3f80);
  CHECK(fp::fp16().encode(1.0) == 0x3c00);
  CHECK(fp::fp32().encode(1.0) == 0x3f800000);
  CHECK(fp::e4m3().encode(448.0) == 0x7e);
  CHECK(ref::encode(448.0, format_named("e4m3")) == 0x7e);
  CHECK(fp::e4m3().quiet_nan_bits(false) == 0x7f);
  CHECK(fp::e4m3().quiet_nan_bits(true) == 0xff);
  CHECK(fp::e5m2().encode(57344.0) == 0x7b);
  CHECK(fp::e5m2().infinity_bits(false) == 0x7c);
  CHECK(fp::e5m2().quiet_nan_bits(false) == 0x7e);
  CHECK(fp::fp16().quiet_nan_bits(true) == 0xfe00);
  CHECK(fp::fp64().quiet_nan_bits(false) == 0x7ff8000000000000ull);
}

TEST_CASE(
    "format parse_format: names, aliases and eXmY give the right fields; bad names throw "
    "FormatError",
    "[format]") {
  check_fields(fp::parse_format("float"), format_named("fp32"));
  check_fields(fp::parse_format("double"), format_named("fp64"));
  check_fields(fp::parse_format("half"), format_named("fp16"));
  check_fields(fp::parse_format("fp8e4m3"), format_named("e4m3"));
  check_fields(fp::parse_format("fp8e5m2"), format_named("e5m2"));
  check_fields(fp::parse_format("e5m10"), format_named("fp16"));
  check_fields(fp::parse_format("e8m23"), format_named("fp32"));
  check_fields(fp::parse_format("e8m7"), format_named("bf16"));
  check_fields(fp::parse_format("e11m52"), format_named("fp64"));
  {
    const Format f = fp::parse_format("e3m2");
    CHECK(f.exp_bits == 3);
    CHECK(f.man_bits == 2);
    CHECK(f.family == fp::Family::ieee);
  }
  for (const auto& name : fp::named_formats()) {
    INFO("named format " << name);
    CHECK_NOTHROW(fp::parse_format(name));
  }
  for (const char* bad : {"", "e1m3", "e12m3", "e5m0", "e5m53", "fp7", "e4m", "em3", "e4m3x", "e-4m3", "E", "fp16 "}) {
    INFO("bad format name '" << bad << "'");
    CHECK_THROWS_AS(fp::parse_format(bad), fp::FormatError);
  }
}

TEST_CASE("mode names: mode_name and parse_mode round-trip every mode; unknown names throw", "[format]") {
  for (Mode m : fp::all_modes) {
    INFO("mode " << mode_text(m));
    CHECK(fp::mode_name(m) == mode_text(m));
    CHECK(fp::parse_mode(mode_text(m)) == m);
  }
  CHECK_THROWS_AS(fp::parse_mode("nearest-ish"), fp::FormatError);
}

namespace {

void exhaustive_bits(const Format& format) {
  MismatchLog log("decode/encode " + format.name);
  const ref::Grid grid(format);
  for (uint64_t bits = 0; bits < (uint64_t{1} << grid.width()); ++bits) {
    auto context = [&] { return format.name + " bits " + show_bits(bits); };
    guarded(log, context, [&] {
      const double want = ref::decode(bits, format);
      const double got = format.decode(bits);
      if (!same_double(got, want) || std::signbit(got) != std::signbit(want))
        return log.fail(context() + ": decode expected " + show(want) + ", got " + show(got));
      // A NaN encodes back to itself, quieted, where the format has payloads (IEEE-like); to the
      // format's one NaN of that sign elsewhere.
      const uint64_t quiet_bit = uint64_t{1} << (format.man_bits - 1);
      const uint64_t want_bits = !std::isnan(want)                      ? bits
                                 : format.family == fp::Family::ieee ? bits | quiet_bit
                                                                     : ref::nan_bits(format, std::signbit(want));
      const uint64_t got_bits = format.encode(got);
      if (got_bits != want_bits)
        return log.fail(context() + ": encode(decode) expected " + show_bits(want_bits) + ", got " +
                        show_bits(got_bits));
      log.pass();
    });
  }
  log.require_none();
}

}  // namespace

TEST_CASE(
    "format bits exhaustive: every bit pattern of e4m3 e5m2 fp16 bf16 and custom e2m1 "
    "e3m2 e3m4 e6m5 e8m3 and IEEE-like e4m3 decodes to the reference value and encodes back",
    "[format][exhaustive]") {
  for (const char* name : {"e4m3", "e5m2", "fp16", "bf16"}) exhaustive_bits(format_named(name));
  for (auto [e, m] : {std::pair{2, 1}, {3, 2}, {3, 4}, {6, 5}, {8, 3}, {4, 3}})
    exhaustive_bits(custom_format(e, m, false));
}

TEST_CASE(
    "format special bit patterns: quiet NaN, infinity, max finite of every output format "
    "agree with the reference",
    "[format]") {
  std::vector<Format> formats = output_formats();
  for (const Format& f : narrow_ml_formats()) formats.push_back(f);
  for (const Format& f : formats) {
    for (bool negative : {false, true}) {
      if (negative && !f.is_signed()) continue;
      INFO("format " << f.name << " negative " << negative);
      if (f.has_nan()) CHECK(f.quiet_nan_bits(negative) == ref::nan_bits(f, negative));
      CHECK(f.max_finite_bits(negative) == ref::max_finite_bits(f, negative));
      if (f.has_infinity()) CHECK(f.infinity_bits(negative) == ref::infinity_bits(f, negative));
      CHECK(f.encode(negative ? -f.max_finite() : f.max_finite()) == ref::max_finite_bits(f, negative));
      CHECK(same_double(f.decode(ref::max_finite_bits(f, negative)),
                        negative ? -ref::Grid(f).max_finite() : ref::Grid(f).max_finite()));
    }
  }
}

TEST_CASE(
    "format encode rejects values not in the format: off-grid, below the least "
    "subnormal, beyond max finite, e4m3's NaN slot and infinity",
    "[format]") {
  const Format fp16 = format_named("fp16"), e4m3 = format_named("e4m3"), bf16 = format_named("bf16");
  for (double x : {1 + 0x1p-11, 65520.0, 65536.0, 0x1p-25, 0x1.8p-25, 1e300}) {
    INFO("fp16 encode " << show(x));
    CHECK_THROWS(fp16.encode(x));
    CHECK_THROWS(ref::encode(x, fp16));
  }
  for (double x : {480.0, 464.0, 512.0, 1.0625, 0x1p-10, std::numeric_limits<double>::infinity()}) {
    INFO("e4m3 encode " << show(x));
    CHECK_THROWS(e4m3.encode(x));
    CHECK_THROWS(ref::encode(x, e4m3));
  }
  CHECK_THROWS(bf16.encode(1 + 0x1p-8));
  CHECK_THROWS(fp::fp32().encode(0x1p-150));
}

TEST_CASE(
    "format ulp: spacing around random |x| <= max finite in every output format agrees "
    "with the reference grid",
    "[format]") {
  std::mt19937_64 rng(20240611);
  INFO("seed 20240611");
  for (const Format& f : output_formats()) {
    MismatchLog log("ulp " + f.name);
    const ref::Grid grid(f);
    std::uniform_int_distribution<int> exponent(grid.emin - grid.precision - 2, grid.emax);
    for (int i = 0; i < 20000; ++i) {
      double x = random_significand(rng, exponent(rng));
      if (i % 7 == 0) x = std::ldexp(1.0, exponent(rng));  // binade boundaries
      if (i == 0) x = 0;
      if (i == 1) x = grid.max_finite();
      if (x > grid.max_finite()) continue;
      if (rng() & 1) x = -x;
      const ref::Position pos = ref::locate(x, grid);
      const double want =
          std::ldexp(1.0, static_cast<int>(pos.kind == ref::Kind::zero ? grid.subnormal_quantum : pos.quantum));
      guarded(
          log, [&] { return "ulp " + show(x); },
          [&] {
            const double got = f.ulp(x);
            if (got == want) return log.pass();
            log.fail(f.name + " ulp(" + show(x) + "): expected " + show(want) + ", got " + show(got));
          });
    }
    log.require_none();
  }
}

// ---------------------------------------------------------------------------------------------
// The reference itself, held against the host's IEEE arithmetic where the two overlap: fp32
// conversion and fp64 addition/fma in rne, rz, ru, rd (subnormals and overflow included).

namespace {

int host_rounding(Mode m) {
  switch (m) {
    case Mode::rne:
      return FE_TONEAREST;
    case Mode::rz:
      return FE_TOWARDZERO;
    case Mode::ru:
      return FE_UPWARD;
    case Mode::rd:
      return FE_DOWNWARD;
    default:
      return -1;
  }
}

double host_to_float(double x, Mode m) {
  volatile double in = x;
  std::fesetround(host_rounding(m));
  volatile float out = static_cast<float>(in);
  std::fesetround(FE_TONEAREST);
  return out;
}

double host_add(double a, double b, Mode m) {
  volatile double va = a, vb = b;
  std::fesetround(host_rounding(m));
  volatile double out = va + vb;
  std::fesetround(FE_TONEAREST);
  return out;
}

double host_fma(double a, double b, double c, Mode m) {
  volatile double va = a, vb = b, vc = c;
  std::fesetround(host_rounding(m));
  volatile double out = std::fma(va, vb, vc);
  std::fesetround(FE_TONEAREST);
  return out;
}

}  // namespace

TEST_CASE(
    "reference self-check: MPFR reference rounding to fp32 equals the host's double->float "
    "conversion in rne rz ru rd, for 200000 random doubles incl. subnormal and overflow",
    "[reference]") {
  std::mt19937_64 rng(777);
  INFO("seed 777");
  const Format fp32 = format_named("fp32");
  MismatchLog log("reference fp32 vs host");
  std::uniform_int_distribution<int> exponent(-160, 130);
  for (int i = 0; i < 200000; ++i) {
    double x = random_significand(rng, exponent(rng));
    if (i % 3 == 0) {  // near a float midpoint
      const double f = static_cast<float>(x);
      const double up = std::nextafter(static_cast<float>(f), INFINITY);
      x = (f + up) / 2;
      if (i % 2) x = std::nextafter(x, (i % 4) ? INFINITY : 0.0);
    }
    if (rng() & 1) x = -x;
    for (Mode m : {Mode::rne, Mode::rz, Mode::ru, Mode::rd}) {
      const double want = host_to_float(x, m);
      const double got = ref::round(x, fp32, m, false, false).front().value;
      if (same_double(got, want))
        log.pass();
      else
        log.fail("fp32 " + mode_text(m) + " x = " + show(x) + ": host " + show(want) + ", reference " + show(got));
    }
  }
  log.require_none();
}

TEST_CASE(
    "reference self-check: reference exact add and fma rounded to fp64 equal the host's "
    "a+b and std::fma in rne rz ru rd, including overflow, subnormals and signed zeros",
    "[reference]") {
  std::mt19937_64 rng(4242);
  INFO("seed 4242");
  const Format fp64 = format_named("fp64");
  MismatchLog log("reference fp64 add/fma vs host");
  auto operand = [&] {
    switch (rng() % 5) {
      case 0:
        return random_finite_bits(rng);
      case 1:
        return std::ldexp(static_cast<double>(rng() >> 11), -1074);  // subnormal range
      case 2:
        return random_significand(rng, 1000 + static_cast<int>(rng() % 24));
      case 3:
        return (rng() & 1) ? 0.0 : -0.0;
      default:
        return random_significand(rng, static_cast<int>(rng() % 200) - 100);
    }
  };
  for (int i = 0; i < 100000; ++i) {
    double a = operand(), b = operand(), c = operand();
    if (i % 4 == 0) b = -a;  // exact cancellation: signed zero rules
    if (i % 4 == 1) b = -std::nextafter(a, 0.0);
    for (Mode m : {Mode::rne, Mode::rz, Mode::ru, Mode::rd}) {
      const double want_add = host_add(a, b, m);
      const double got_add = ref::round(ref::exact_add(a, b, m), fp64, m, false, false).front().value;
      const double want_fma = host_fma(a, b, c, m);
      const double got_fma = ref::round(ref::exact_fma(a, b, c, m), fp64, m, false, false).front().value;
      auto same = [](double x, double y) { return same_double(x, y) && std::signbit(x) == std::signbit(y); };
      if (same(got_add, want_add))
        log.pass();
      else
        log.fail("add " + mode_text(m) + " " + show(a) + " + " + show(b) + ": host " + show(want_add) + ", reference " +
                 show(got_add));
      if (same(got_fma, want_fma) || std::isnan(want_fma))
        log.pass();
      else
        log.fail("fma " + mode_text(m) + " " + show(a) + " * " + show(b) + " + " + show(c) + ": host " +
                 show(want_fma) + ", reference " + show(got_fma));
    }
  }
  log.require_none();
}

TEST_CASE(
    "reference self-check: documented e4m3 facts (rne 460 -> 448, 464 -> 448 (tie to even "
    "M=14), 470 -> NaN or 448 saturated, rz 1000 -> 448, ro 450 -> 448, inf -> NaN or 448)",
    "[reference]") {
  const Format e4m3 = format_named("e4m3");
  auto r = [&](double x, Mode m, bool sat = false) { return ref::round(x, e4m3, m, false, sat).front(); };
  CHECK(r(460, Mode::rne).value == 448);
  CHECK(r(464, Mode::rne).value == 448);
  CHECK(std::isnan(r(470, Mode::rne).value));
  CHECK(r(470, Mode::rne).bits == 0x7f);
  CHECK(r(470, Mode::rne).overflow);
  CHECK(r(470, Mode::rne, true).value == 448);
  CHECK(r(-470, Mode::rne, true).value == -448);
  CHECK(r(1000, Mode::rz).value == 448);
  CHECK(r(450, Mode::ro).value == 448);
  CHECK(r(-1000, Mode::ru).value == -448);
  CHECK(std::isnan(r(-1000, Mode::rd).value));
  CHECK(std::isnan(r(INFINITY, Mode::rne).value));
  CHECK(r(-INFINITY, Mode::rne, true).value == -448);
  const Format e5m2 = format_named("e5m2");
  CHECK(std::isinf(ref::round(61440, e5m2, Mode::rne, false, false).front().value));  // tie: 57344 M=7 odd
  CHECK(ref::round(61439, e5m2, Mode::rne, false, false).front().value == 57344);
  CHECK(ref::round(INFINITY, e5m2, Mode::rne, false, true).front().value == INFINITY);
}

// ---------------------------------------------------------------------------------------------
// The ML formats of ml_dtypes and gfloat beyond fp8 e4m3/e5m2. Their facts are written here as
// the OCP MX v1.0 spec and ml_dtypes' numeric_limits state them, so that a slip shared by fp/
// and the MPFR reference (which both derive them from the family) still shows.

TEST_CASE(
    "format ML families: e4m3ieee e4m3fnuz e5m2fnuz e4m3b11fnuz e3m2fn e2m3fn e2m1fn e8m0 have "
    "ml_dtypes' max, least subnormal, NaN and max bit patterns, and parse by their ml_dtypes names",
    "[format]") {
  struct Fact {
    const char* name;
    const char* ml_dtypes_name;
    double max, min_subnormal;
    uint64_t max_bits;
    int nan_bits;  // -1: no NaN
  };
  const Fact facts[] = {
      {"e4m3ieee", "float8_e4m3", 240, 0x1p-9, 0x77, 0x7c},  // inf 0x78, quiet NaN 0b0.1111.100
      {"e4m3fnuz", "float8_e4m3fnuz", 240, 0x1p-10, 0x7f, 0x80},
      {"e5m2fnuz", "float8_e5m2fnuz", 57344, 0x1p-17, 0x7f, 0x80},
      {"e4m3b11fnuz", "float8_e4m3b11fnuz", 30, 0x1p-13, 0x7f, 0x80},
      {"e3m2fn", "float6_e3m2fn", 28, 0.0625, 0x1f, -1},
      {"e2m3fn", "float6_e2m3fn", 7.5, 0.125, 0x1f, -1},
      {"e2m1fn", "float4_e2m1fn", 6, 0.5, 0x7, -1},
      {"e8m0", "float8_e8m0fnu", 0x1p127, 0x1p-127, 0xfe, 0xff},
  };
  for (const Fact& fact : facts) {
    INFO("format " << fact.name);
    const Format want = format_named(fact.name);
    const Format got = fp::parse_format(fact.name);
    check_fields(got, want);
    check_fields(fp::parse_format(fact.ml_dtypes_name), want);
    CHECK(got.name == fact.name);
    CHECK(got.max_finite() == fact.max);
    CHECK(ref::Grid(want).max_finite() == fact.max);
    CHECK(got.min_subnormal() == fact.min_subnormal);
    CHECK(ref::Grid(want).min_subnormal() == fact.min_subnormal);
    CHECK(got.max_finite_bits(false) == fact.max_bits);
    CHECK(ref::max_finite_bits(want, false) == fact.max_bits);
    CHECK(got.has_nan() == (fact.nan_bits >= 0));
    if (fact.nan_bits >= 0) {
      CHECK(got.quiet_nan_bits(false) == static_cast<uint64_t>(fact.nan_bits));
      CHECK(ref::nan_bits(want, false) == static_cast<uint64_t>(fact.nan_bits));
    }
    // The "-0" pattern: a NaN in fnuz formats, -0 where -0 exists.
    if (got.is_signed()) {
      const double minus_zero = got.decode(uint64_t{1} << (got.width() - 1));
      CHECK((std::isnan(minus_zero) == (got.family == fp::Family::fnuz)));
    }
  }
  CHECK(fp::parse_format("fp4_e2m1") == fp::e2m1fn());
  CHECK(fp::parse_format("fp6_e2m3") == fp::e2m3fn());
  CHECK(fp::parse_format("fp6_e3m2") == fp::e3m2fn());
  CHECK(fp::parse_format("float8_e4m3fn") == fp::e4m3());
  // Existing names keep their meaning: eXmY is IEEE-like (e2m1 max 3), e4m3 is OCP FN.
  CHECK(fp::parse_format("e2m1").max_finite() == 3);
  CHECK(fp::parse_format("e2m3").max_finite() == 3.75);
  CHECK(fp::parse_format("e3m2").max_finite() == 14);
  CHECK(fp::parse_format("e4m3").max_finite() == 448);
  CHECK(fp::e8m0().width() == 8);
  CHECK(fp::e8m0().decode(0x7f) == 1.0);
  CHECK(fp::e8m0().decode(0x00) == 0x1p-127);
  CHECK(fp::e2m1fn().width() == 4);
  CHECK(fp::e2m3fn().width() == 6);
  // Every value of MX FP4, as the OCP MX spec lists them.
  std::vector<double> fp4;
  for (uint64_t bits = 0; bits < 8; ++bits) fp4.push_back(fp::e2m1fn().decode(bits));
  CHECK(fp4 == std::vector<double>{0, 0.5, 1, 1.5, 2, 3, 4, 6});
}

TEST_CASE("format unknown names: one line listing every known name and the eXmY form", "[format]") {
  try {
    fp::parse_format("e4m3fnuzz");
    FAIL("no error");
  } catch (const fp::FormatError& e) {
    const std::string message = e.what();
    CHECK(message.find('\n') == std::string::npos);
    for (const auto& name : fp::named_formats()) CHECK(message.find(name) != std::string::npos);
    CHECK(message.find("eXmY") != std::string::npos);
  }
}

TEST_CASE(
    "format bits exhaustive: every bit pattern of e4m3ieee, the fnuz family, MX FP6/FP4 and "
    "e8m0 decodes to the reference value and encodes back",
    "[format][exhaustive]") {
  for (const Format& f : narrow_ml_formats()) exhaustive_bits(f);
}

TEST_CASE(
    "format generic spellings: [floatN_]eXmY[bB][fn|fnuz] give the layout the suffix names, "
    "the named format where one has it, and one-line errors",
    "[format]") {
  struct Spelling {
    const char* text;
    const char* name;  // canonical
    int exp_bits, man_bits, bias;
    fp::Family family;
    double max;
  };
  const Spelling spellings[] = {
      {"e3m4fn", "e3m4fn", 3, 4, 3, fp::Family::fn, 30},              // 1.875 * 2^4: S.111.1111 is NaN
      {"float8_e3m4", "e3m4", 3, 4, 3, fp::Family::ieee, 15.5},       // ml_dtypes float8_e3m4
      {"e3m3fn", "e3m3fn", 3, 3, 3, fp::Family::finite, 30},          // 7 bits: no NaN, as FP6/FP4
      {"e5m3fn", "e5m3fn", 5, 3, 15, fp::Family::fn, 0x1.cp16},       // 9 bits: NaN at all ones
      {"e4m3b10fnuz", "e4m3b10fnuz", 4, 3, 10, fp::Family::fnuz, 60}, // 1.875 * 2^(15-10)
      {"e2m2fnuz", "e2m2fnuz", 2, 2, 2, fp::Family::fnuz, 3.5},       // bias 1 + 1
      {"e5m2b20", "e5m2b20", 5, 2, 20, fp::Family::ieee, 0x1.cp10},   // 1.75 * 2^(30-20)
      {"e4m3fn", "e4m3", 4, 3, 7, fp::Family::fn, 448},
      {"float8_e4m3fn", "e4m3", 4, 3, 7, fp::Family::fn, 448},
      {"e4m3b7", "e4m3ieee", 4, 3, 7, fp::Family::ieee, 240},
      {"e4m3b8fnuz", "e4m3fnuz", 4, 3, 8, fp::Family::fnuz, 240},
      {"e4m3b11fnuz", "e4m3b11fnuz", 4, 3, 11, fp::Family::fnuz, 30},
      {"e5m2b16fnuz", "e5m2fnuz", 5, 2, 16, fp::Family::fnuz, 57344},
      {"e2m1fn", "e2m1fn", 2, 1, 1, fp::Family::finite, 6},
      {"float6_e3m2fn", "e3m2fn", 3, 2, 3, fp::Family::finite, 28},
      {"e8m7", "e8m7", 8, 7, 127, fp::Family::ieee, 0x1.fep127},      // bf16's grid under its own name
      {"E5M10", "fp16", 5, 10, 15, fp::Family::ieee, 65504},
  };
  for (const Spelling& s : spellings) {
    INFO("spelling " << s.text);
    const Format f = fp::parse_format(s.text);
    CHECK(f.name == s.name);
    CHECK(f.exp_bits == s.exp_bits);
    CHECK(f.man_bits == s.man_bits);
    CHECK(f.bias() == s.bias);
    CHECK(f.family == s.family);
    CHECK(f.max_finite() == s.max);
    CHECK(ref::Grid(f).max_finite() == s.max);
    CHECK(fp::parse_format(f.name) == f);  // the canonical name reads back
  }
  for (const char* bad : {"float6_e4m3fn", "float8_e4m3b", "e4m3fnu", "e4m3fnuz8", "e11m52b3000", "e11m4b-2000",
                          "float8e4m3", "e4m3bfn", "e1m3fn", "e5m0fn"}) {
    INFO("bad spelling '" << bad << "'");
    try {
      fp::parse_format(bad);
      FAIL("no error");
    } catch (const fp::FormatError& e) {
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
      CHECK(std::string(e.what()).find(bad) != std::string::npos);
    }
  }
}

TEST_CASE(
    "format bits exhaustive: every bit pattern of generic fn, fnuz, finite and biased layouts "
    "decodes to the reference value and encodes back",
    "[format][exhaustive]") {
  for (const char* name : {"e3m4fn", "e3m3fn", "e5m3fn", "e4m3b10fnuz", "e2m2fnuz", "e5m2b20", "e6m1fnuz", "e2m5fn"})
    exhaustive_bits(fp::parse_format(name));
}

TEST_CASE("format NaN payloads: decode widens them as x86 does, encode and rounding keep what fits", "[format]") {
  // fp32 0x7fc12345 widens to the double whose fraction starts with the same 23 bits.
  const double wide = fp::fp32().decode(0x7fc12345);
  CHECK(std::bit_cast<uint64_t>(wide) == 0x7ff82468a0000000ull);
  CHECK(fp::fp32().encode(wide) == 0x7fc12345);
  // A signalling pattern comes back quiet.
  CHECK(fp::fp32().encode(fp::fp32().decode(0xff812345)) == 0xffc12345);
  // Narrowing keeps the payload's leading bits: fp16 keeps 9 below its quiet bit.
  const double payload_nan = std::bit_cast<double>(0xfff9234567890abcull);
  CHECK(fp::round_double(payload_nan, fp::fp16(), {}).bits == 0xfe48);
  CHECK(fp::round_double(payload_nan, fp::bf16(), {}).bits == 0xffc9);
  CHECK(fp::round_double(payload_nan, fp::e5m2(), {}).bits == 0xfe);
  // Formats with one NaN per sign (or none) ignore the payload.
  CHECK(fp::round_double(payload_nan, fp::e4m3(), {}).bits == 0xff);
  CHECK(fp::round_double(payload_nan, fp::e4m3fnuz(), {}).bits == 0x80);
}
