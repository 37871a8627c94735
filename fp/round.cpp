#include "fp/round.hpp"
#include "fp/ieee_bits.hpp"

#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>

namespace fplab::fp {
namespace {

double signed_value(bool negative, double magnitude) { return negative ? -magnitude : magnitude; }

// 2^q for q in the double range (subnormal powers included), without a library call.
double power_of_two(int64_t q) {
  if (q >= binary64::kMinNormalExponent) return binary64::power_of_two(static_cast<int>(q));
  return std::bit_cast<double>(uint64_t{1} << (q - binary64::kSubnormalScale));
}

Rounded special(const Format& f, uint64_t bits, bool inexact, bool overflow, bool underflow = false) {
  return Rounded{f.decode(bits), bits, inexact, overflow, underflow};
}

// A result the format has no value for (a NaN in fp4/fp6; zero, a negative number or a
// magnitude below 2^-127 in e8m0): NaN where the format has one; in formats without a NaN,
// a zero of the input's sign (fplab's choice: the OCP MX spec leaves NaN conversion to the
// implementation). With saturate, e8m0 clamps to its least value 2^-127 (as ml_dtypes does).
Rounded unrepresentable(bool negative, const Format& f, const RoundingOptions& o, bool underflow) {
  if (!f.has_zero() && o.saturates()) return special(f, f.min_value_bits(), true, false, underflow);
  if (f.has_nan()) return special(f, f.quiet_nan_bits(negative), true, false, underflow);
  return special(f, f.zero_bits(negative), true, false, underflow);
}

// The result of an overflow, decided by the direction the mode rounds the magnitude. A format
// with neither infinity nor NaN (OCP MX FP6/FP4) has nothing but max to give: it saturates.
Rounded overflowed(bool negative, const Format& f, const RoundingOptions& o) {
  const bool toward_zero =
      o.mode == Mode::rz || o.mode == Mode::ro || (o.mode == Mode::ru && negative) || (o.mode == Mode::rd && !negative);
  if (toward_zero || o.saturates() || !f.has_nan()) return special(f, f.max_finite_bits(negative), true, true);
  if (f.has_infinity()) return special(f, f.infinity_bits(negative), true, true);
  return special(f, f.quiet_nan_bits(negative), true, true);
}

// A zero result: fnuz formats have only +0, e8m0 none at all.
Rounded zero(bool negative, const Format& f, const RoundingOptions& o, bool inexact, bool underflow) {
  if (!f.has_zero()) return unrepresentable(negative, f, o, underflow);
  const uint64_t bits = f.zero_bits(negative);
  return Rounded{f.decode(bits), bits, inexact, false, underflow};
}

// Whether stochastic rounding goes up, the dropped part being fraction64 / 2^64 of an ulp. With
// R = sr_bits, hardware adds R random bits r to the dropped part truncated to R bits, t, and
// rounds up on a carry: t + r >= 2^R, so that the chance is t / 2^R and a dropped part below
// 2^-R ulp never rounds up. A draw d from the stream stands for r = 2^R - 1 - (d's top R bits),
// which turns the test into d's top R bits < t: at R = 64 the comparison fplab has always made.
bool stochastic_up(uint64_t fraction64, const RoundingOptions& o) {
  const int r_bits = o.sr_bits;
  if (r_bits < 1 || r_bits > 64)
    throw std::invalid_argument("stochastic rounding: sr_bits must be 1..64, got " + std::to_string(r_bits));
  const uint64_t t = fraction64 >> (64 - r_bits);
  if (o.sr_random) {
    if (r_bits == 64) return *o.sr_random > ~t;  // t + r >= 2^64
    const uint64_t r = *o.sr_random & ((uint64_t{1} << r_bits) - 1);
    return ((t + r) >> r_bits) != 0;
  }
  if (o.stream == nullptr) throw std::logic_error("stochastic rounding without a random stream");
  return (o.stream->next() >> (64 - r_bits)) < t;
}

}  // namespace

Rounded round_exact(const ExactValue& x, const Format& f, const RoundingOptions& o) {
  const uint64_t sign_bit = f.is_signed() ? uint64_t{x.negative} << (f.exp_bits + f.man_bits) : 0;
  switch (x.kind) {
    case ExactValue::Kind::nan:
      if (!f.has_nan()) return unrepresentable(x.negative, f, o, false);
      return special(f, f.nan_bits(x.negative, x.significand), false, false);
    case ExactValue::Kind::infinite:
      if (f.has_infinity() && !o.saturate_infinities) return special(f, f.infinity_bits(x.negative), false, false);
      if (x.negative && !f.is_signed()) return unrepresentable(true, f, o, false);
      // Without a NaN there is nothing but max to give (OCP MX FP6/FP4 conversions saturate).
      if (o.saturates() || !f.has_nan()) return special(f, f.max_finite_bits(x.negative), true, false);
      return special(f, f.quiet_nan_bits(x.negative), true, false);
    case ExactValue::Kind::zero:
      return zero(x.negative, f, o, !f.has_zero(), false);
    case ExactValue::Kind::finite:
      if (x.negative && !f.is_signed()) return unrepresentable(true, f, o, false);
      break;
  }

  // Exponent of the result's last place: the binade's, or the subnormal spacing below emin;
  // unbounded above so that overflow is judged after rounding, as IEEE 754 asks.
  const int64_t lead = x.exponent;
  // Without subnormals (e8m0) the grid goes on shrinking below emin, so that what lies below
  // the least value is judged after rounding, as overflow is.
  const int64_t ulp_exponent = (f.has_subnormals() ? std::max<int64_t>(lead, f.emin()) : lead) - f.man_bits;
  const int64_t dropped = ulp_exponent - (lead - 63);  // >= 11 since man_bits <= 52

  uint64_t kept, fraction64;  // fraction64: the dropped part as a 64-bit binary fraction
  bool round_bit, rest;
  if (dropped < 64) {
    kept = x.significand >> dropped;
    const uint64_t dropped_bits = x.significand & ((uint64_t{1} << dropped) - 1);
    round_bit = (dropped_bits >> (dropped - 1)) & 1;
    rest = (dropped_bits & ((uint64_t{1} << (dropped - 1)) - 1)) != 0 || x.sticky;
    fraction64 = dropped_bits << (64 - dropped);
  } else {
    kept = 0;
    round_bit = dropped == 64;  // the significand's top bit is set
    rest = dropped == 64 ? (x.significand << 1) != 0 || x.sticky : true;
    fraction64 = dropped - 64 >= 64 ? 0 : x.significand >> (dropped - 64);
  }
  const bool inexact = round_bit || rest;

  bool up = false;
  switch (o.mode) {
    case Mode::rne:
      up = round_bit && (rest || (kept & 1));
      break;
    case Mode::rna:
      up = round_bit;
      break;
    case Mode::rz:
      break;
    case Mode::ru:
      up = inexact && !x.negative;
      break;
    case Mode::rd:
      up = inexact && x.negative;
      break;
    case Mode::ro:
      kept |= uint64_t{inexact};
      break;
    case Mode::sr:
      if (inexact) up = stochastic_up(fraction64, o);
      break;
  }
  int64_t q = ulp_exponent;
  if (up) {
    ++kept;
    if (kept == uint64_t{1} << f.precision()) {
      kept >>= 1;
      ++q;
    }
  }

  if (kept == 0) return zero(x.negative, f, o, inexact, inexact);
  const int64_t result_lead = q + (63 - std::countl_zero(kept));
  const bool nan_slot = f.family == Family::fn && result_lead == f.emax() && kept == (uint64_t{1} << f.precision()) - 1;
  if (result_lead > f.emax() || nan_slot) return overflowed(x.negative, f, o);
  if (!f.has_subnormals() && result_lead < f.emin()) {
    // Below e8m0's least value: rounding up (ru; negative inputs never get here) has 2^-127 to
    // give, whatever the unbounded grid says; the other modes have nothing, as with overflow.
    if (o.mode == Mode::ru) return special(f, f.min_value_bits(), true, false, true);
    return unrepresentable(x.negative, f, o, true);
  }

  const bool subnormal = result_lead < f.emin();
  if (subnormal && o.flush_subnormals) return zero(x.negative, f, o, true, true);
  const uint64_t fraction_mask = (uint64_t{1} << f.man_bits) - 1;
  const uint64_t biased = subnormal ? 0 : static_cast<uint64_t>(result_lead + f.bias());
  const uint64_t bits = sign_bit | (biased << f.man_bits) | (kept & fraction_mask);
  // kept < 2^53 and the product is a value of the format, so both steps are exact.
  const double magnitude = static_cast<double>(kept) * power_of_two(q);
  return Rounded{signed_value(x.negative, magnitude), bits, inexact, false, inexact && subnormal};
}

}  // namespace fplab::fp
