#include "fp/exact_value.hpp"
#include "fp/ieee_bits.hpp"

#include <bit>
#include <cmath>

namespace fplab::fp {

ExactValue ExactValue::from_integer(bool negative, unsigned __int128 magnitude, int64_t scale, bool sticky) {
  if (magnitude == 0) return zero(negative);
  const auto high = static_cast<uint64_t>(magnitude >> 64);
  const int lead = high ? 127 - std::countl_zero(high) : 63 - std::countl_zero(static_cast<uint64_t>(magnitude));
  // Keep the 64 bits from the leading one down; what falls below only sets sticky.
  uint64_t top;
  if (lead >= 63) {
    const int drop = lead - 63;
    top = static_cast<uint64_t>(magnitude >> drop);
    sticky = sticky || (drop > 0 && (magnitude & ((static_cast<unsigned __int128>(1) << drop) - 1)) != 0);
  } else {
    top = static_cast<uint64_t>(magnitude) << (63 - lead);
  }
  return {Kind::finite, negative, scale + lead, top, sticky};
}

ExactValue ExactValue::from_double(double x) {
  const DoubleParts parts = split_double(x);
  if (!parts.finite) {
    const uint64_t fraction = parts.significand & binary64::kFractionMask;
    // The payload is what lies below the quiet bit (bit 51): shifted up by 64 - 51.
    return fraction ? nan(parts.negative, fraction << (64 - (binary64::kFractionBits - 1))) : infinity(parts.negative);
  }
  if (parts.significand == 0) return zero(parts.negative);
  if (parts.scale == binary64::kSubnormalScale && parts.significand < binary64::kHiddenBit)
    return from_integer(parts.negative, parts.significand, parts.scale, false);
  return {Kind::finite, parts.negative, parts.scale + binary64::kFractionBits, parts.significand << 11, false};
}

}  // namespace fplab::fp
