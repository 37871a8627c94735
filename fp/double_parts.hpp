// Internal to fp/: a finite double split into sign, integer significand and scale.
#pragma once

#include <bit>
#include <cstdint>

namespace fplab::fp::detail {

struct DoubleParts {
  bool negative;
  bool finite;
  uint64_t significand;  // integer, < 2^53; 0 for zeros
  int scale;             // value = significand * 2^scale
};

inline DoubleParts split_double(double x) {
  const uint64_t bits = std::bit_cast<uint64_t>(x);
  const int biased = static_cast<int>((bits >> 52) & 0x7ff);
  const uint64_t fraction = bits & ((uint64_t{1} << 52) - 1);
  if (biased == 0) return {bool(bits >> 63), true, fraction, -1074};
  return {bool(bits >> 63), biased != 0x7ff, fraction | (uint64_t{1} << 52), biased - 1075};
}

}  // namespace fplab::fp::detail
