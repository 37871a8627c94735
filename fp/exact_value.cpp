#include "fp/exact_value.hpp"

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
  const uint64_t bits = std::bit_cast<uint64_t>(x);
  const bool negative = bits >> 63;
  const int biased = static_cast<int>((bits >> 52) & 0x7ff);
  const uint64_t fraction = bits & ((uint64_t{1} << 52) - 1);
  if (biased == 0x7ff) return fraction ? nan(negative) : infinity(negative);
  if (biased == 0) {
    if (fraction == 0) return zero(negative);
    return from_integer(negative, fraction, -1074, false);
  }
  return {Kind::finite, negative, biased - 1023, (fraction | (uint64_t{1} << 52)) << 11, false};
}

}  // namespace fplab::fp
