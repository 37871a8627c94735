#include "fp/arithmetic.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "fp/ieee_bits.hpp"
#include "fp/round.hpp"
#include "fp/superaccumulator.hpp"

namespace fplab::fp {

using u128 = unsigned __int128;

ExactValue exact_sum(double a, double b, Mode mode) {
  if (std::isnan(a) || std::isnan(b)) return ExactValue::nan();
  if (std::isinf(a) || std::isinf(b)) {
    if (std::isinf(a) && std::isinf(b) && std::signbit(a) != std::signbit(b)) return ExactValue::nan();
    return ExactValue::infinity(std::signbit(std::isinf(a) ? a : b));
  }
  auto x = split_double(a), y = split_double(b);
  if (x.significand == 0 && y.significand == 0)  // two zeros: -0 only if both are, or rd with one
    return ExactValue::zero(mode == Mode::rd ? (x.negative || y.negative) : (x.negative && y.negative));
  if (x.significand == 0) return ExactValue::from_double(b);
  if (y.significand == 0) return ExactValue::from_double(a);
  if (x.scale < y.scale) std::swap(x, y);
  const bool subtract = x.negative != y.negative;
  const int gap = x.scale - y.scale;
  u128 magnitude;
  int scale;
  bool sticky = false;
  bool negative = x.negative;
  if (gap <= 64) {
    // Exact in 128 bits: x's significand shifted by at most 64 stays below 2^117.
    const u128 big = static_cast<u128>(x.significand) << gap;
    const u128 small = y.significand;
    scale = y.scale;
    if (!subtract) {
      magnitude = big + small;
    } else if (big >= small) {
      magnitude = big - small;
    } else {
      magnitude = small - big;
      negative = y.negative;
    }
  } else {
    // y lies entirely below x's last bit shifted by 64: it only moves the result by less than
    // one unit of the 2^(x.scale-64) place, so a truncated y plus a sticky bit is exact enough.
    const int below = gap - 64;
    const uint64_t truncated = below >= 64 ? 0 : y.significand >> below;
    const bool lost = below >= 64 ? true : (y.significand & ((uint64_t{1} << below) - 1)) != 0;
    const u128 big = static_cast<u128>(x.significand) << 64;
    scale = x.scale - 64;
    if (!subtract) {
      magnitude = big + truncated;
      sticky = lost;
    } else {
      magnitude = big - truncated - (lost ? 1 : 0);
      sticky = lost;
    }
  }
  if (magnitude == 0) return ExactValue::zero(mode == Mode::rd);
  return ExactValue::from_integer(negative, magnitude, scale, sticky);
}

ExactValue exact_product(double a, double b) {
  const bool negative = std::signbit(a) != std::signbit(b);
  if (std::isnan(a) || std::isnan(b)) return ExactValue::nan();
  if (std::isinf(a) || std::isinf(b)) {
    if (a == 0 || b == 0) return ExactValue::nan();
    return ExactValue::infinity(negative);
  }
  const auto x = split_double(a), y = split_double(b);
  if (x.significand == 0 || y.significand == 0) return ExactValue::zero(negative);
  return ExactValue::from_integer(negative, static_cast<u128>(x.significand) * y.significand, x.scale + y.scale, false);
}

namespace {

// The fast path of add and mul for narrow formats (bf16, fp16, fp8, tf32, any eXmY of at most 51
// bits): the exact result rounded to odd in binary64, then to the format by cutting bits. It
// covers only what needs no more than that: deterministic modes, results in the format's normal
// range after rounding, formats whose range sits well inside binary64's (so that TwoSum and the
// FMA product error are exact). Everything else (zeros, subnormals, overflow, specials, sr, fp64)
// gets no fast result and goes through round_exact; test_arithmetic checks both against MPFR.
bool has_fast_path(const Format& f, Mode mode) {
  return mode != Mode::sr && f.man_bits <= 50 && f.family != Family::exponent && f.emin() >= -900 &&
         f.emax() <= 1000 && (f.family != Family::fn || f.man_bits >= 1);
}

// Marks "no fast result" (a fast result is never NaN). Not std::optional: its flag byte stored and
// read back as a word stalled store forwarding on every call (perf: half of a bf16 training step).
constexpr double kNoFastResult = std::numeric_limits<double>::quiet_NaN();

// x: a double rounded to odd from the exact result (so its bits keep the sticky bit).
double round_odd_double(double x, const Format& f, Mode mode) {
  const int cut = binary64::kFractionBits - f.man_bits;  // >= 2
  // The format's least normal and largest finite values, built from their bits (Format's own
  // functions go through ldexp, too slow for every addition).
  const double min_normal = binary64::power_of_two(f.emin());
  const uint64_t top_fraction = ((uint64_t{1} << f.man_bits) - 1 - (f.family == Family::fn ? 1 : 0)) << cut;
  const double max_finite = std::bit_cast<double>(binary64::power_of_two_bits(f.emax()) | top_fraction);
  if (!(std::fabs(x) >= min_normal)) return kNoFastResult;  // zero, subnormal in f, or NaN
  const auto bits = std::bit_cast<uint64_t>(x);
  const uint64_t unit = uint64_t{1} << cut, rest = bits & (unit - 1), kept = bits - rest;
  const uint64_t half = unit >> 1;
  const bool negative = x < 0;
  uint64_t result = kept;
  switch (mode) {
    case Mode::rne:
      if (rest > half || (rest == half && (kept & unit) != 0)) result += unit;
      break;
    case Mode::rna:
      if (rest >= half) result += unit;
      break;
    case Mode::rz:
      break;
    case Mode::ru:
      if (rest != 0 && !negative) result += unit;
      break;
    case Mode::rd:
      if (rest != 0 && negative) result += unit;
      break;
    case Mode::ro:  // the last kept bit becomes 1 if anything was cut
      if (rest != 0) result |= unit;
      break;
    case Mode::sr:
      return kNoFastResult;
  }
  // Adding a unit to the magnitude's bits carries into the exponent where it should.
  const double rounded = std::bit_cast<double>(result);
  if (std::fabs(rounded) > max_finite) return kNoFastResult;  // overflow has its own rules
  return rounded;
}

// add_each's fast path for one mode: every lane computed without branches (so that GCC
// vectorises the loop), lanes the fast path cannot decide marked in `slow` and left unchanged.
template <Mode kMode>
void add_each_fast(double* acc, const double* x, size_t n, const Format& f, uint8_t* slow) {
  const int cut = binary64::kFractionBits - f.man_bits;
  const uint64_t unit = uint64_t{1} << cut, half = unit >> 1;
  const uint64_t min_normal = binary64::power_of_two_bits(f.emin());
  const uint64_t max_finite = binary64::power_of_two_bits(f.emax()) |
                              (((uint64_t{1} << f.man_bits) - 1 - (f.family == Family::fn ? 1 : 0)) << cut);
  for (size_t i = 0; i < n; ++i) {
    const double a = acc[i], b = x[i];
    // sum_rounded_to_odd in integer lane operations: where TwoSum's error is nonzero and the
    // sum's last bit even, step one unit toward the error (down in magnitude if the signs differ).
    const double s = a + b, z = s - a, error = (a - (s - z)) + (b - z);
    const auto error_bits = std::bit_cast<uint64_t>(error);
    uint64_t bits = std::bit_cast<uint64_t>(s);
    const uint64_t step = static_cast<uint64_t>((error_bits & binary64::kMagnitudeMask) != 0) & ~bits & 1;
    const uint64_t toward_zero = (error_bits ^ bits) >> 63;
    bits = bits + step - 2 * (step & toward_zero);
    const uint64_t sign = bits & ~binary64::kMagnitudeMask, magnitude = bits & binary64::kMagnitudeMask;
    const uint64_t rest = magnitude & (unit - 1), kept = magnitude - rest;
    auto unit_if = [unit](bool condition) { return unit & (uint64_t{0} - static_cast<uint64_t>(condition)); };
    uint64_t result = kept;
    if constexpr (kMode == Mode::rne) result += unit_if((rest > half) | ((rest == half) & ((kept & unit) != 0)));
    if constexpr (kMode == Mode::rna) result += unit_if(rest >= half);
    if constexpr (kMode == Mode::ru) result += unit_if((rest != 0) & (sign == 0));
    if constexpr (kMode == Mode::rd) result += unit_if((rest != 0) & (sign != 0));
    if constexpr (kMode == Mode::ro) result |= unit_if(rest != 0);
    // Not finite, zero, subnormal in f, or overflowing (NaN and inf bits exceed max_finite).
    const bool fast = (magnitude >= min_normal) & (result <= max_finite);
    const uint64_t keep_new = uint64_t{0} - static_cast<uint64_t>(fast);
    slow[i] = !fast;
    acc[i] = std::bit_cast<double>(((result | sign) & keep_new) | (std::bit_cast<uint64_t>(a) & ~keep_new));
  }
}

}  // namespace

void add_each(double* acc, const double* x, size_t n, const Format& format, const RoundingOptions& options,
              CounterRng* streams) {
  auto one_by_one = [&](size_t i) {
    acc[i] = add(acc[i], x[i], format,
                 {options.mode, options.flush_subnormals, options.saturate, streams ? &streams[i] : nullptr});
  };
  if (!has_fast_path(format, options.mode)) {
    for (size_t i = 0; i < n; ++i) one_by_one(i);
    return;
  }
  constexpr size_t kBlock = 256;
  uint8_t slow[kBlock];
  for (size_t first = 0; first < n; first += kBlock) {
    const size_t len = std::min(kBlock, n - first);
    double* a = acc + first;
    const double* b = x + first;
    switch (options.mode) {
      case Mode::rne:
        add_each_fast<Mode::rne>(a, b, len, format, slow);
        break;
      case Mode::rna:
        add_each_fast<Mode::rna>(a, b, len, format, slow);
        break;
      case Mode::rz:
        add_each_fast<Mode::rz>(a, b, len, format, slow);
        break;
      case Mode::ru:
        add_each_fast<Mode::ru>(a, b, len, format, slow);
        break;
      case Mode::rd:
        add_each_fast<Mode::rd>(a, b, len, format, slow);
        break;
      case Mode::ro:
        add_each_fast<Mode::ro>(a, b, len, format, slow);
        break;
      case Mode::sr:  // has_fast_path excludes it
        break;
    }
    for (size_t i = 0; i < len; ++i)
      if (slow[i]) one_by_one(first + i);
  }
}

double add(double a, double b, const Format& format, const RoundingOptions& options) {
  if (has_fast_path(format, options.mode)) {
    const double r = round_odd_double(sum_rounded_to_odd(a, b), format, options.mode);
    if (r == r) return r;
  }
  return round_exact(exact_sum(a, b, options.mode), format, options).value;
}

double mul(double a, double b, const Format& format, const RoundingOptions& options) {
  if (has_fast_path(format, options.mode)) {
    // p + error is the exact product where p is well inside binary64's normal range.
    const double p = a * b;
    if (std::isfinite(p) && std::fabs(p) >= 0x1p-960) {
      const double error = std::fma(a, b, -p);
      const double r = round_odd_double(sum_rounded_to_odd(p, error), format, options.mode);
      if (r == r) return r;
    }
  }
  return round_exact(exact_product(a, b), format, options).value;
}

double fma(double a, double b, double c, const Format& format, const RoundingOptions& options) {
  SuperAccumulator acc;
  acc.add_product(a, b);
  acc.add(c);
  return acc.round(format, options).value;
}

}  // namespace fplab::fp
