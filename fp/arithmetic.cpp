#include "fp/arithmetic.hpp"

#include <cmath>

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

double add(double a, double b, const Format& format, const RoundingOptions& options) {
  return round_exact(exact_sum(a, b, options.mode), format, options).value;
}

double mul(double a, double b, const Format& format, const RoundingOptions& options) {
  return round_exact(exact_product(a, b), format, options).value;
}

double fma(double a, double b, double c, const Format& format, const RoundingOptions& options) {
  SuperAccumulator acc;
  acc.add_product(a, b);
  acc.add(c);
  return acc.round(format, options).value;
}

}  // namespace fplab::fp
