#include "fp/mx_block.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "fp/exact_value.hpp"
#include "fp/round.hpp"

namespace fplab::fp {
namespace {

constexpr int kScaleMin = -127, kScaleMax = 127;  // e8m0's exponents (its pattern 0xff is NaN)

void check_element(const Format& element, size_t block) {
  if (block == 0) throw FormatError("MX block size must be at least 1");
  // At most 8 exponent bits keep every X * P_i a normal double (2^-276 ... 2^255): exact.
  if (!element.is_signed() || element.exp_bits > 8)
    throw FormatError("format " + element.name +
                      " cannot hold MX elements: they are signed, of at most 8 exponent bits (e4m3, e5m2, e3m2fn, "
                      "e2m3fn, e2m1fn, ...)");
}

}  // namespace

int mx_scale_exponent(std::span<const double> block, const Format& element) {
  double amax = 0;
  for (double v : block) {
    if (std::isnan(v)) return kMxScaleNan;
    amax = std::max(amax, std::fabs(v));
  }
  if (amax == 0) return kScaleMin;  // any scale would do; the least marks the block as (near) zero
  if (std::isinf(amax)) return kScaleMax;
  // ilogb is floor(log2(amax)) exactly, subnormal doubles included.
  return std::clamp(std::ilogb(amax) - element.emax(), kScaleMin, kScaleMax);
}

MxBlocks mx_quantize(std::span<const double> values, const Format& element, size_t block, Mode mode,
                     CounterRng* stream) {
  check_element(element, block);
  // Up front, not at the first inexact element: whether it comes must not depend on the data.
  if (mode == Mode::sr && stream == nullptr) throw std::logic_error("mx_quantize: stochastic rounding needs a stream");
  MxBlocks out{element, block, {}, {}, {}, {}};
  const size_t n = values.size();
  out.scale_bits.reserve((n + block - 1) / block);
  out.element_bits.resize(n);
  out.elements.resize(n);
  out.dequantized.resize(n);
  // Saturating whatever the mode: the spec clamps to +-max (section 6.3), and so the rounding never
  // gives an infinity or (in e4m3) a NaN for a finite or infinite element.
  const RoundingOptions options{mode, false, true, stream};
  for (size_t first = 0; first < n; first += block) {
    const auto members = values.subspan(first, std::min(block, n - first));
    const int s = mx_scale_exponent(members, element);
    const bool nan_scale = s == kMxScaleNan;
    out.scale_bits.push_back(nan_scale ? 0xff : static_cast<uint8_t>(s + 127));
    for (size_t i = 0; i < members.size(); ++i) {
      const size_t at = first + i;
      if (nan_scale) {
        out.element_bits[at] = element.has_nan() ? element.quiet_nan_bits(false) : element.zero_bits(false);
        out.elements[at] = element.decode(out.element_bits[at]);
        out.dequantized[at] = std::nan("");
        continue;
      }
      ExactValue x = ExactValue::from_double(members[i]);
      if (x.kind == ExactValue::Kind::infinite) {
        out.element_bits[at] = element.max_finite_bits(x.negative);
      } else {
        x.exponent -= s;  // v / 2^s, exactly
        out.element_bits[at] = round_exact(x, element, options).bits;
      }
      out.elements[at] = element.decode(out.element_bits[at]);
      // Exact: elements of at most 8 exponent bits lie within 2^-149 ... 2^128, so P_i * 2^s is a
      // normal double or zero.
      out.dequantized[at] = std::ldexp(out.elements[at], s);
    }
  }
  return out;
}

}  // namespace fplab::fp
