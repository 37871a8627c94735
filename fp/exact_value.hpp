// An exact real value, or one known to 64 significant bits plus a sticky bit, on its way to
// being rounded. Everything that rounds (a double, a sum of two doubles, the superaccumulator)
// first describes its exact result this way, then calls round_exact() once.
#pragma once

#include <cstdint>

namespace fplab::fp {

struct ExactValue {
  enum class Kind : uint8_t { zero, finite, infinite, nan };
  Kind kind = Kind::zero;
  bool negative = false;
  // For finite values: |value| = significand * 2^(exponent - 63) + tail, where the top bit of
  // significand is set and 0 <= tail < 2^(exponent - 63); sticky says whether tail > 0.
  // For NaNs, significand holds the payload: the fraction bits below the quiet bit, the first of
  // them at bit 63 (as x86 and Arm conversions keep it: the leading bits that fit).
  int64_t exponent = 0;
  uint64_t significand = 0;
  bool sticky = false;

  static ExactValue zero(bool negative) { return {Kind::zero, negative, 0, 0, false}; }
  static ExactValue infinity(bool negative) { return {Kind::infinite, negative, 0, 0, false}; }
  static ExactValue nan(bool negative = false, uint64_t payload = 0) {
    return {Kind::nan, negative, 0, payload, false};
  }
  // magnitude * 2^scale, plus a tail below 2^scale when sticky; magnitude == 0 gives zero.
  static ExactValue from_integer(bool negative, unsigned __int128 magnitude, int64_t scale, bool sticky);
  static ExactValue from_double(double x);
};

}  // namespace fplab::fp
