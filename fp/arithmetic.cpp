#include "fp/arithmetic.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

#include "fp/fp32_cut.hpp"
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
// range after rounding (and, in rne without flushing, zeros and subnormals: cut_to_format),
// formats whose range sits well inside binary64's (so that TwoSum and the FMA product error are
// exact). Everything else (overflow, specials, sr, fp64, the other modes' zeros and subnormals)
// gets no fast result and goes through round_exact; test_arithmetic checks both against MPFR.
bool has_fast_path(const Format& f, Mode mode) {
  return mode != Mode::sr && f.man_bits <= 50 && f.family != Family::exponent && f.emin() >= -900 && f.emax() <= 1000 &&
         (f.family != Family::fn || f.man_bits >= 1);
}

// What cutting a double to a narrow format needs, from the format's fields (Format's own
// functions go through ldexp, too slow for every addition).
struct NarrowFormat {
  uint64_t unit, half;       // the format's last significand bit, and half of it, in a double's bits
  uint64_t min_normal_bits;  // its least normal value
  uint64_t max_finite_bits;  // its largest finite value
  // 1.5 * 2^(52 + emin - man_bits): a double whose last bit is the format's subnormal spacing.
  double subnormal_grid;
  // Results below the normal range rounded on the subnormal grid: mode rne, not flushed, and a
  // format whose zero has both signs (fnuz's has one).
  bool subnormals;
  NarrowFormat(const Format& f, Mode mode, bool flush)
      : unit(uint64_t{1} << (binary64::kFractionBits - f.man_bits)),
        half(unit >> 1),
        min_normal_bits(binary64::power_of_two_bits(f.emin())),
        max_finite_bits(binary64::power_of_two_bits(f.emax()) |
                        (((uint64_t{1} << f.man_bits) - 1 - (f.family == Family::fn ? 1 : 0)) * unit)),
        subnormal_grid(
            std::bit_cast<double>(binary64::power_of_two_bits(binary64::kFractionBits + f.emin() - f.man_bits) |
                                  (uint64_t{1} << (binary64::kFractionBits - 1)))),
        subnormals(mode == Mode::rne && !flush && f.has_negative_zero()) {}
};

// Rounds `bits`, a double rounded to odd from the exact result (so its last bit keeps the sticky
// bit), to the format in mode kMode, without branches (add_each's loop vectorises). `fast` is
// false where round_exact's rules are needed: overflow, not finite (NaN and inf bits exceed
// max_finite_bits), and zero or subnormal in the format except in rne without flushing.
template <Mode kMode>
uint64_t cut_to_format(uint64_t bits, const NarrowFormat& f, bool& fast) {
  const uint64_t sign = bits & ~binary64::kMagnitudeMask, magnitude = bits & binary64::kMagnitudeMask;
  const uint64_t rest = magnitude & (f.unit - 1), kept = magnitude - rest;
  auto unit_if = [&f](bool condition) { return f.unit & (uint64_t{0} - static_cast<uint64_t>(condition)); };
  // Adding a unit to the magnitude's bits carries into the exponent where it should.
  uint64_t result = kept;
  if constexpr (kMode == Mode::rne) result += unit_if((rest > f.half) | ((rest == f.half) & ((kept & f.unit) != 0)));
  if constexpr (kMode == Mode::rna) result += unit_if(rest >= f.half);
  if constexpr (kMode == Mode::ru) result += unit_if((rest != 0) & (sign == 0));
  if constexpr (kMode == Mode::rd) result += unit_if((rest != 0) & (sign != 0));
  if constexpr (kMode == Mode::ro) result |= unit_if(rest != 0);  // the last kept bit 1 if anything was cut
  const bool normal = magnitude >= f.min_normal_bits;
  fast = normal & (result <= f.max_finite_bits);
  if constexpr (kMode == Mode::rne) {
    // Below the normal range the grid is the subnormal spacing u: adding and removing a double
    // whose last bit is u rounds to it, to nearest even, in the host's own arithmetic. That
    // rounds the exact result correctly because bits, rounded to odd, is at least 2 bits finer
    // than u there (the format has at most 50 stored bits), so it lies on the same side of every
    // midpoint as the exact result. Zeros (exact cancellation included) keep the host's sign.
    const uint64_t below =
        std::bit_cast<uint64_t>((std::bit_cast<double>(magnitude) + f.subnormal_grid) - f.subnormal_grid);
    const uint64_t use_below = uint64_t{0} - static_cast<uint64_t>(!normal);
    result = (below & use_below) | (result & ~use_below);
    fast |= !normal & f.subnormals;
  }
  return result | sign;
}

// Calls fn(std::integral_constant<Mode, m>{}) for the deterministic mode m (has_fast_path
// excludes sr).
template <class Fn>
void with_fast_mode(Mode mode, Fn&& fn) {
  switch (mode) {
    case Mode::rne:
      return fn(std::integral_constant<Mode, Mode::rne>{});
    case Mode::rna:
      return fn(std::integral_constant<Mode, Mode::rna>{});
    case Mode::rz:
      return fn(std::integral_constant<Mode, Mode::rz>{});
    case Mode::ru:
      return fn(std::integral_constant<Mode, Mode::ru>{});
    case Mode::rd:
      return fn(std::integral_constant<Mode, Mode::rd>{});
    case Mode::ro:
      return fn(std::integral_constant<Mode, Mode::ro>{});
    case Mode::sr:
      return;
  }
}

// The fast result for odd, a double rounded to odd from the exact result; NaN where there is none
// (a fast result never is NaN). Not std::optional: its flag byte stored and read back as a word
// stalled store forwarding on every call (perf: half of a bf16 training step).
double round_odd_double(double odd, const Format& format, const RoundingOptions& options) {
  double out = std::numeric_limits<double>::quiet_NaN();
  with_fast_mode(options.mode, [&](auto m) {
    bool fast = false;
    const uint64_t bits = cut_to_format<m()>(std::bit_cast<uint64_t>(odd),
                                             NarrowFormat(format, options.mode, options.flush_subnormals), fast);
    if (fast) out = std::bit_cast<double>(bits);
  });
  return out;
}

// add_each's fast path for one mode: lanes the fast path cannot decide marked in `slow` and left
// unchanged.
template <Mode kMode>
void add_each_fast(double* acc, const double* x, size_t n, const NarrowFormat& f, uint8_t* slow) {
  for (size_t i = 0; i < n; ++i) {
    bool fast = false;
    const uint64_t bits = cut_to_format<kMode>(std::bit_cast<uint64_t>(sum_rounded_to_odd(acc[i], x[i])), f, fast);
    const uint64_t keep_new = uint64_t{0} - static_cast<uint64_t>(fast);
    slow[i] = !fast;
    acc[i] = std::bit_cast<double>((bits & keep_new) | (std::bit_cast<uint64_t>(acc[i]) & ~keep_new));
  }
}

// add_each's fp32 path for formats fp32 arithmetic can stand in for (Fp32Cut): where acc[i] and
// x[i] are floats, Fp32Cut::sum of them. Lanes that are not floats, or whose cut is
// undecided, are marked in `slow` and left unchanged. Three loops of one element width each
// (GCC vectorises none of them when they are one loop). n <= kAddEachBlock.
constexpr size_t kAddEachBlock = 256;
void add_each_fp32(double* acc, const double* x, size_t n, const Fp32Cut& cut, uint8_t* slow) {
  float a[kAddEachBlock], b[kAddEachBlock], sum[kAddEachBlock];
  uint32_t not_float[kAddEachBlock], undecided[kAddEachBlock];
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(acc[i]), b[i] = static_cast<float>(x[i]);
    not_float[i] = (static_cast<double>(a[i]) != acc[i]) | (static_cast<double>(b[i]) != x[i]);
  }
  const Fp32Cut c = cut;
  for (size_t i = 0; i < n; ++i) sum[i] = c.sum(a[i], b[i], undecided[i]);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t keep_old = uint64_t{0} - static_cast<uint64_t>((undecided[i] | not_float[i]) != 0);
    slow[i] = static_cast<uint8_t>(keep_old & 1);
    acc[i] = std::bit_cast<double>((std::bit_cast<uint64_t>(acc[i]) & keep_old) |
                                   (std::bit_cast<uint64_t>(static_cast<double>(sum[i])) & ~keep_old));
  }
}

}  // namespace

void add_each(double* acc, const double* x, size_t n, const Format& format, const RoundingOptions& options,
              CounterRng* streams) {
  auto one_by_one = [&](size_t i) {
    RoundingOptions own = options;
    own.stream = streams ? &streams[i] : nullptr;
    acc[i] = add(acc[i], x[i], format, own);
  };
  if (!has_fast_path(format, options.mode)) {
    for (size_t i = 0; i < n; ++i) one_by_one(i);
    return;
  }
  const NarrowFormat narrow(format, options.mode, options.flush_subnormals);
  const std::optional<Fp32Cut> cut = Fp32Cut::of(format, options);
  constexpr size_t kBlock = kAddEachBlock;
  uint8_t slow[kBlock];
  for (size_t first = 0; first < n; first += kBlock) {
    const size_t len = std::min(kBlock, n - first);
    if (cut)
      add_each_fp32(acc + first, x + first, len, *cut, slow);
    else
      with_fast_mode(options.mode, [&](auto m) { add_each_fast<m()>(acc + first, x + first, len, narrow, slow); });
    for (size_t i = 0; i < len; ++i)
      if (slow[i]) one_by_one(first + i);
  }
}

double add(double a, double b, const Format& format, const RoundingOptions& options) {
  if (has_fast_path(format, options.mode)) {
    const double r = round_odd_double(sum_rounded_to_odd(a, b), format, options);
    if (!std::isnan(r)) return r;
  }
  return round_exact(exact_sum(a, b, options.mode), format, options).value;
}

double mul(double a, double b, const Format& format, const RoundingOptions& options) {
  if (has_fast_path(format, options.mode)) {
    // p + error is the exact product where p is well inside binary64's normal range.
    const double p = a * b;
    if (std::isfinite(p) && std::fabs(p) >= 0x1p-960) {
      const double error = std::fma(a, b, -p);
      const double r = round_odd_double(sum_rounded_to_odd(p, error), format, options);
      if (!std::isnan(r)) return r;
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
