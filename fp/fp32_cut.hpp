// Rounding to a narrow format, to nearest, by cutting the bits of an fp32 result: how a sum or an
// FMA in a format of at most 23 significant bits inside fp32's range (bf16, fp16, tf32, fp8, any
// such eXmY) runs at the speed of fp32 arithmetic.
//
// Why it is exact: every decision point of rounding to the format to nearest (the midpoints
// between its neighbours, the overflow threshold) is an fp32 number. Rounding the exact result x
// to fp32 first, then cutting to the format, therefore gives the format's rounding of x unless
// the fp32 result lands exactly on a decision point (x may then lie on either side of it); such a
// result is reported undecided (its cut-off bits were exactly half a unit), as are results past
// the format's largest finite value (and, with flushing, below its least normal one). Below the
// least normal of a format whose normal range starts above fp32's the grid is absolute (multiples
// of its least subnormal): operator() scales such a format first, so that its least normal value
// becomes fp32's and its subnormals are cut at the same bits as its normal values (one more
// rounding onto a grid that holds every decision point); sum() and sum_of_values() work in the
// format's own scale instead (no fp32 subnormals, which Intel cores assist). The host must keep
// subnormals (no FTZ or DAZ: of() returns nullopt where they are set).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>

#include "fp/format.hpp"
#include "fp/rounding.hpp"

namespace fplab::fp {

struct Fp32Cut {
  uint32_t unit_half = 0;        // half the format's last significand bit, in fp32's bits
  uint32_t keep = 0;             // mask of the bits the format keeps
  uint32_t threshold = 0;        // |x| (scaled) from which rounding overflows (a midpoint), in fp32's bits
  bool check_range = false;      // overflow to other than fp32's infinity, or flushing: check every result
  uint32_t flush = 0;            // 1: results below the normal range are flushed, undecided there
  uint32_t ties_to_even = 1;     // 1: rne, 0: rna
  float scale = 1, unscale = 1;  // powers of two that move the format's least normal to 2^-126
  // threshold and the format's least normal in its own scale, in fp32's bits (sum, sum_of_values)
  uint32_t own_threshold = 0, own_least_normal = 0;
  // 1.5 · 2^23 times the format's least subnormal u (fp32's spacing between 2^23 u and 2^24 u is
  // u), and u / 2: sum's rounding below grid_limit, the least normal's bits for a format the cut
  // scales; 0 (and the two 0) for one whose subnormals are fp32's, whose bits the cut takes as
  // they are (and so that no operation has a subnormal operand, which Intel cores assist)
  float grid_magic = 0, half_grid = 0;
  uint32_t grid_limit = 0;
  bool scaled() const { return scale != 1; }

  // The cut for a format and rounding, where one exists: formats of the ieee, fn or finite family
  // with at most 22 stored mantissa bits and a normal range inside fp32's, least normal at most 1
  // (not fnuz, whose one zero has no sign, nor a bias of 0); modes rne and rna.
  static std::optional<Fp32Cut> of(const Format& format, const RoundingOptions& options);

  // The format's rounding of x, given s, fp32's rounding (to nearest even) of x: exact unless
  // `undecided` is set to 1 (then the result is meaningless). Integer flags and no branches, so
  // that loops over it vectorise; a non-finite s is undecided.
  float operator()(float s, uint32_t& undecided) const {
    const uint32_t bits = std::bit_cast<uint32_t>(s * scale), t = bits + unit_half;
    undecided = static_cast<uint32_t>((t & ~keep) == 0) | out_of_range(bits);
    return std::bit_cast<float>(t & keep) * unscale;
  }

  // The format's rounding of a + b (floats): as operator() on their fp32 sum, but a sum on a
  // midpoint is decided too, by the sum's error (TwoSum, exact): above or below the midpoint, or
  // on it (a tie). It runs in the format's own scale, so that no value becomes an fp32 subnormal
  // (which Intel cores take a microcode assist on): from the least normal up the sum is cut on its
  // bits, below it rounded on the format's absolute grid, multiples of its least subnormal u, by
  // fp32's own addition at spacing u. Undecided only where the sum is not finite or out of range.
  float sum(float a, float b, uint32_t& undecided) const {
    const float s = a + b, z = s - a, error = (a - (s - z)) + (b - z);
    const uint32_t bits = std::bit_cast<uint32_t>(s), magnitude = bits & 0x7fffffffu;
    const uint32_t error_bits = std::bit_cast<uint32_t>(error);
    const uint32_t inexact = static_cast<uint32_t>((error_bits & 0x7fffffffu) != 0);
    const uint32_t below = inexact & ((error_bits ^ bits) >> 31);  // the exact sum nearer zero than s
    // On the bits: at a midpoint, toward zero where the exact sum lies below it in magnitude, or
    // on it (a tie) where nearest-even keeps the smaller neighbour.
    const uint32_t t = bits + unit_half, midpoint = static_cast<uint32_t>((t & ~keep) == 0);
    const uint32_t away = t & keep, down = bits & keep;
    const uint32_t tie_down = (inexact ^ 1u) & ties_to_even & static_cast<uint32_t>((down & (unit_half << 1)) == 0);
    const uint32_t toward_zero = uint32_t{0} - (midpoint & (below | tie_down));
    const uint32_t cut = (down & toward_zero) | (away & ~toward_zero);
    // On the grid: |s| to the nearest even multiple of u; at a midpoint, the neighbour toward zero
    // where the exact sum lies below it, that even one on a tie under rne, else the one away.
    const float m = std::bit_cast<float>(magnitude), r = (m + grid_magic) - grid_magic;
    const uint32_t grid_midpoint = static_cast<uint32_t>(std::fabs(m - r) == half_grid);
    const uint32_t lower = uint32_t{0} - (grid_midpoint & below);
    const uint32_t upper = uint32_t{0} - (grid_midpoint & (below ^ 1u) & (inexact | (ties_to_even ^ 1u)));
    uint32_t on_grid = std::bit_cast<uint32_t>(r);
    on_grid = (on_grid & ~lower) | (std::bit_cast<uint32_t>(m - half_grid) & lower);
    on_grid = (on_grid & ~upper) | (std::bit_cast<uint32_t>(m + half_grid) & upper);
    const uint32_t small = uint32_t{0} - static_cast<uint32_t>(magnitude < grid_limit);
    undecided = out_of_range(bits, own_threshold, own_least_normal);
    return std::bit_cast<float>((cut & ~small) | ((on_grid | (bits & 0x80000000u)) & small));
  }

  // Whether sum_of_values holds for the format: at most 11 significant bits.
  bool sums_of_values_land_on_ties() const { return unit_half >= (uint32_t{1} << 12); }

  // sum() where a and b are values of the format (sums_of_values_land_on_ties()), without
  // TwoSum: such a sum is exact in fp32 wherever it lands on a midpoint, so the midpoint is a
  // tie. (Were it inexact, |a| >= |b| would need a bit of b below fp32's last at s's exponent
  // e, so |b| < 2^(e - 24 + P) for P significant bits, while a midpoint lies at least 2^(e - P)
  // from any value of the format, a among them: 2^(e - P) <= |b| + 2^(e - 24) fails for P <= 11.)
  // It needs no scaling: a sum below the format's least normal is a multiple of the format's
  // least subnormal below 2^emin, exact in fp32 and a value of the format, which the cut keeps
  // as it is; one above is cut on the same bits as scaled. (Scaled, such a sum would be an fp32
  // subnormal, which Intel cores take a microcode assist on.) Undecided only where out of range.
  float sum_of_values(float a, float b, uint32_t& undecided) const {
    const uint32_t bits = std::bit_cast<uint32_t>(a + b);
    undecided = out_of_range(bits, own_threshold, own_least_normal);
    return cut_at_ties(bits);
  }

  // sum_of_values where the caller knows that no sum reaches the format's largest value and that
  // nothing is flushed (flush == 0): always decided.
  float sum_of_values_in_range(float a, float b) const { return cut_at_ties(std::bit_cast<uint32_t>(a + b)); }

 private:
  // The bits of an exact fp32 result cut to the format, a midpoint being a tie.
  float cut_at_ties(uint32_t bits) const {
    const uint32_t t = bits + unit_half, midpoint = static_cast<uint32_t>((t & ~keep) == 0);
    const uint32_t away = t & keep, down = bits & keep;
    const uint32_t tie_down = ties_to_even & static_cast<uint32_t>((down & (unit_half << 1)) == 0);
    const uint32_t toward_zero = uint32_t{0} - (midpoint & tie_down);
    return std::bit_cast<float>((down & toward_zero) | (away & ~toward_zero));
  }

  // 1 where the scaled bits are past the threshold, not finite, or flushed.
  uint32_t out_of_range(uint32_t bits) const { return out_of_range(bits, threshold, 0x00800000u); }
  // The same in any scale, given the threshold and least normal's bits in it.
  uint32_t out_of_range(uint32_t bits, uint32_t limit, uint32_t least_normal) const {
    const uint32_t magnitude = bits & 0x7fffffffu;
    return static_cast<uint32_t>(magnitude >= limit) | static_cast<uint32_t>(magnitude >= 0x7f800000u) |
           (flush & static_cast<uint32_t>(magnitude != 0) & static_cast<uint32_t>(magnitude < least_normal));
  }
};

}  // namespace fplab::fp
