#include "sim/binned_sum.hpp"

#include <bit>
#include <cmath>

#include "fp/arithmetic.hpp"
#include "fp/superaccumulator.hpp"

namespace fplab::sim {

double binned_sum(std::span<const double> terms, const fp::Format& format, const fp::RoundingOptions& options) {
  double largest = 0;
  bool finite = true;
  for (double x : terms) {
    finite = finite && std::isfinite(x);
    largest = std::max(largest, std::fabs(x));
  }
  if (!finite || largest == 0) {  // IEEE rules for inf/NaN and for the sign of zeros
    fp::SuperAccumulator acc;
    for (double x : terms) acc.add(x);
    return acc.round(format, options).value;
  }
  constexpr int kFolds = 3;
  const int n_bits = static_cast<int>(std::bit_width(terms.size() - 1));  // ceil(log2 n)
  // Bins are binary64, as in ReproBLAS: fold widths 52 - ceil(log2 n) bits whatever the format
  // (a bin in a 24-bit format would have no room left for 10^7 terms).
  constexpr int p = 53;
  int bound = std::ilogb(largest) + 1;  // every |term| < 2^bound
  std::vector<double> rest(terms.begin(), terms.end());
  double folds[kFolds];
  for (int k = 0; k < kFolds; ++k) {
    // Grid g: n pieces of magnitude <= 2^bound, multiples of g, sum to < 2^(p-1) g: an exact
    // int64 count of grid units, and an exact double once scaled.
    const int grid_exponent = std::max(bound + n_bits + 1 - p, -1074);
    const double g = std::ldexp(1.0, grid_exponent);
    // Scaling by 2^-grid_exponent is exact; a multiply is much cheaper than ldexp where that
    // power of two is a normal double.
    const bool by_multiply = grid_exponent > -1022 && grid_exponent < 1022;
    const double inverse = by_multiply ? 1.0 / g : 0.0;
    int64_t units = 0;
    for (double& x : rest) {
      const double scaled = by_multiply ? x * inverse : std::ldexp(x, -grid_exponent);
      const double q = std::nearbyint(scaled);  // default mode: nearest-even
      units += static_cast<int64_t>(q);
      x -= q * g;  // exact: the part of x below the grid
    }
    folds[k] = static_cast<double>(units) * g;
    bound = grid_exponent - 1;  // |remainder| <= g / 2
  }
  return fp::add(fp::add(folds[0], folds[1], format, options), folds[2], format, options);
}

}  // namespace fplab::sim
