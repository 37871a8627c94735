#include "fp/fp32_cut.hpp"

#include <bit>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "fp/ieee_bits.hpp"

namespace fplab::fp {
namespace {

// Whether the host's fp32 arithmetic flushes subnormals (x86's MXCSR FTZ or DAZ set, e.g. by
// torch.set_flush_denormal(True) in the process): the cut then cannot stand in for the format.
bool host_flushes_subnormals() {
#if defined(__SSE__)
  constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;
  return (_mm_getcsr() & (kFlushToZero | kDenormalsAreZero)) != 0;
#else
  return false;
#endif
}

}  // namespace

std::optional<Fp32Cut> Fp32Cut::of(const Format& f, const RoundingOptions& options) {
  const bool family = f.family == Family::ieee || f.family == Family::fn || f.family == Family::finite;
  // A midpoint needs one bit more than the format's precision: at most fp32's 24.
  // emin > 0 (a bias of 0) would need a scale below fp32's normal range.
  if (!family || f.man_bits > 22 || f.emin() < -126 || f.emin() > 0 || f.emax() > 127) return std::nullopt;
  if (host_flushes_subnormals()) return std::nullopt;
  if (options.mode != Mode::rne && options.mode != Mode::rna) return std::nullopt;
  // From the format's fields with bit operations: add_each builds a cut for every row it adds.
  Fp32Cut cut;
  const uint32_t unit = uint32_t{1} << (binary32::kFractionBits - f.man_bits);
  cut.unit_half = unit >> 1;
  cut.keep = ~(unit - 1);
  const auto power_of_two = [](int e) {
    return std::bit_cast<float>(static_cast<uint32_t>(e + binary32::kBias) << binary32::kFractionBits);
  };
  cut.scale = power_of_two(-126 - f.emin());
  cut.unscale = power_of_two(126 + f.emin());
  // The largest finite value's bits, scaled (its exponent moved by -126 - emin): all ones, or
  // all ones but the last bit where that pattern is NaN (fn).
  const uint32_t top_fraction = ((uint32_t{1} << f.man_bits) - 1 - (f.family == Family::fn ? 1 : 0)) * unit;
  const uint32_t max_scaled =
      (static_cast<uint32_t>(f.emax() - 126 - f.emin() + binary32::kBias) << binary32::kFractionBits) | top_fraction;
  cut.threshold = max_scaled + cut.unit_half;
  cut.own_threshold = std::bit_cast<uint32_t>(std::bit_cast<float>(cut.threshold) * cut.unscale);
  cut.own_least_normal = std::bit_cast<uint32_t>(0x1p-126f * cut.unscale);
  const float least_subnormal = 0x1p-126f * cut.unscale * power_of_two(-f.man_bits);  // exact, maybe an fp32 subnormal
  if (cut.scaled()) {
    cut.grid_magic = 0x1.8p23f * least_subnormal;
    cut.half_grid = 0.5f * least_subnormal;
    cut.grid_limit = cut.own_least_normal;
  }
  cut.flush = options.flush_subnormals ? 1 : 0;
  cut.ties_to_even = options.mode == Mode::rne ? 1 : 0;
  // An IEEE format with fp32's exponent range overflows where fp32 does, to the infinity the cut
  // keeps (its bits carry into the exponent); anything else is checked.
  cut.check_range = !(f.family == Family::ieee && f.emax() == 127 && !options.saturate) || options.flush_subnormals;
  return cut;
}

}  // namespace fplab::fp
