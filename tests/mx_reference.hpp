// An independent OCP MX block quantizer for the tests (fp/mx_block.hpp is the code under test):
// the shared exponent from MPFR's exponent of amax, each v / X formed exactly in MPFR and rounded by
// the MPFR reference (fp/mpfr_reference.hpp) with saturation. It uses nothing of fp/'s rounding or
// of Format's derived facts: the element format's emax comes from reference::Grid.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "fp/mpfr_reference.hpp"

namespace fplab::test {

struct MxReferenceBlock {
  std::optional<int> scale;            // s of X = 2^s; nullopt: the NaN scale
  std::vector<uint64_t> element_bits;  // only for a non-NaN scale
  std::vector<double> elements, dequantized;
};

// One block as the spec's section 6.3 reads, with fplab's documented choices for what it leaves
// open (an all-zero block: s = -127; an infinity: s = 127 and the element +-max; a NaN: the NaN
// scale). Deterministic modes only.
inline MxReferenceBlock mx_reference_block(std::span<const double> block, const fp::Format& element, fp::Mode mode) {
  namespace ref = fp::reference;
  const ref::Grid grid(element);
  MxReferenceBlock out;
  bool any_inf = false, all_zero = true;
  long amax_floor = 0;
  bool have_amax = false;
  for (double v : block) {
    if (std::isnan(v)) return out;  // the NaN scale
    if (std::isinf(v)) any_inf = true;
    if (v == 0 || std::isinf(v)) continue;
    all_zero = false;
    const ref::Real r = ref::Real::from_double(v);
    const long e = mpfr_get_exp(r.get()) - 1;  // |v| = m * 2^exp with m in [1/2, 1): floor(log2 |v|) = exp - 1
    amax_floor = have_amax ? std::max(amax_floor, e) : e;
    have_amax = true;
  }
  int s = any_inf ? 127 : all_zero ? -127 : static_cast<int>(std::clamp<long>(amax_floor - grid.emax, -127, 127));
  out.scale = s;
  for (double v : block) {
    ref::Result r;
    if (std::isinf(v)) {
      r.bits = ref::max_finite_bits(element, v < 0);
      r.value = ref::decode(r.bits, element);
    } else {
      ref::Real x = ref::Real::from_double(v);
      mpfr_div_2si(x.get(), x.get(), s, MPFR_RNDN);  // exact: a power of two
      r = ref::round(x.get(), element, mode, false, true).front();
    }
    out.element_bits.push_back(r.bits);
    out.elements.push_back(r.value);
    out.dequantized.push_back(std::ldexp(r.value, s));
  }
  return out;
}

// Every block of `values` (blocks of `block`, the last one shorter) dequantized by the reference.
inline std::vector<double> mx_reference_dequantized(std::span<const double> values, const fp::Format& element,
                                                    size_t block = 32) {
  std::vector<double> out;
  for (size_t first = 0; first < values.size(); first += block) {
    const auto members = values.subspan(first, std::min(block, values.size() - first));
    const MxReferenceBlock b = mx_reference_block(members, element, fp::Mode::rne);
    if (!b.scale)
      out.insert(out.end(), members.size(), std::nan(""));
    else
      out.insert(out.end(), b.dequantized.begin(), b.dequantized.end());
  }
  return out;
}

}  // namespace fplab::test
