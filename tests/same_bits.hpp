// Bit-for-bit equality of two results, any NaN counting as equal to any NaN (evaluators need not
// agree on a NaN's payload).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace fplab::test {

inline bool same_bits(double x, double y) {
  return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y) || (std::isnan(x) && std::isnan(y));
}

}  // namespace fplab::test
