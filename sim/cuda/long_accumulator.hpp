// An exact sum of fp32 values or of products of two fp32 values, for the `exact` profile on the
// GPU (gpu_exact.cu): every term added exactly into one fixed-point number, rounded once at the
// end to fp32, to nearest even — what sim::gemm and sim::reduce compute for `all:exact` in fp32.
// Compiled for the device there and for the host in tests/test_long_accumulator.cpp, which holds
// it to the CPU engine bit for bit, so that the GPU's arithmetic is checked where no GPU is.
//
// Why fixed point suffices: a float is M 2^e with M < 2^24 and e in [-149, 104], a product of two
// M 2^e with M < 2^48 and e in [-298, 208]; so every term is an integer multiple of 2^-298 below
// 2^256. The accumulator holds the sum in units of 2^-298 as kLimbs digits of 32 bits, each in a
// signed 64-bit word whose carries wait until the end: a term changes at most three digits by less
// than 2^32 each, so 2^31 terms cannot overflow a word.
#pragma once

#include <cstdint>

#include "sim/cuda/fused_step.hpp"

namespace fplab::sim::gpu {

class LongAccumulator {
 public:
  static constexpr int kUnitExponent = -298;  // the weight of the accumulator's lowest bit
  static constexpr int kLimbs = 19;           // 608 bits: the 554 a term reaches, and carries

  FPLAB_HOST_DEVICE LongAccumulator() {
    for (int i = 0; i < kLimbs; ++i) limb_[i] = 0;
  }

  // value += a b, exactly; the sign of a zero product kept for the sign of a zero sum.
  FPLAB_HOST_DEVICE void add_product(float a, float b) {
    using namespace fused_step_detail;
    const uint32_t xa = bits_of(a), xb = bits_of(b);
    const bool negative = ((xa ^ xb) >> 31) != 0;
    any_term_ = true;
    const uint32_t ea = (xa >> 23) & 0xffu, eb = (xb >> 23) & 0xffu;
    if (ea == 0xffu || eb == 0xffu) return special(xa, xb, negative);
    positive_sign_ |= !negative;
    const uint32_t fa = xa & 0x7fffffu, fb = xb & 0x7fffffu;
    if ((ea == 0 && fa == 0) || (eb == 0 && fb == 0)) return;  // a zero product: its sign only
    const uint64_t ma = ea ? (fa | 0x800000u) : fa, mb = eb ? (fb | 0x800000u) : fb;
    // a = ma 2^(max(ea, 1) - 150), likewise b; the product's unit 2^(ea' + eb' - 300) = 2^-298 2^p
    const int p = static_cast<int>(ea ? ea : 1) + static_cast<int>(eb ? eb : 1) - 2;
    add_integer(ma * mb, p, negative);
  }

  // value += x, exactly (a float is x times 1).
  FPLAB_HOST_DEVICE void add_value(float x) { add_product(x, 1.0f); }

  // value += other's value, exactly (fixed point adds without rounding: a sum's terms may be
  // accumulated in parts, in any grouping, and merged). The parts' terms together below 2^31.
  FPLAB_HOST_DEVICE void merge(const LongAccumulator& other) {
    for (int i = 0; i < kLimbs; ++i) limb_[i] += other.limb_[i];
    nan_ |= other.nan_, pos_inf_ |= other.pos_inf_, neg_inf_ |= other.neg_inf_;
    positive_sign_ |= other.positive_sign_, any_term_ |= other.any_term_;
  }

  // The sum rounded to fp32, to nearest even: +-inf past the range; NaN (0x7fc00000) for a NaN
  // term, an infinity times zero or infinities of both signs; an exact zero is -0 only where every
  // term (zero or not) had a negative sign, +0 otherwise (and for no terms).
  FPLAB_HOST_DEVICE float round_to_fp32() const {
    using namespace fused_step_detail;
    if (nan_ || (pos_inf_ && neg_inf_)) return float_of(0x7fc00000u);
    if (pos_inf_ || neg_inf_) return float_of(neg_inf_ ? 0xff800000u : 0x7f800000u);
    // Carries through, then the magnitude and its sign.
    uint32_t digit[kLimbs];
    int64_t carry = 0;
    for (int i = 0; i < kLimbs; ++i) {
      const int64_t v = limb_[i] + carry;
      digit[i] = static_cast<uint32_t>(v);
      carry = (v - static_cast<int64_t>(digit[i])) / (int64_t{1} << 32);  // exact: v - low is a multiple
    }
    const bool negative = carry < 0;  // the top digit's carry is the sum's sign (it cannot overflow)
    if (negative) {  // two's complement of the digits
      uint64_t borrow = 1;
      for (int i = 0; i < kLimbs; ++i) {
        const uint64_t v = static_cast<uint64_t>(static_cast<uint32_t>(~digit[i])) + borrow;
        digit[i] = static_cast<uint32_t>(v);
        borrow = v >> 32;
      }
    }
    int top = kLimbs - 1;
    while (top >= 0 && digit[top] == 0) --top;
    if (top < 0) return float_of(positive_sign_ || !any_term_ ? 0u : 0x80000000u);
    // The leading bit's index L in units of 2^-298; the value is 2^(L - 298) times [1, 2).
    const int lead = top * 32 + 31 - leading_zeros(digit[top]);
    // The kept bits: 24 of them for a normal result, from bit 2^-149 (index 149) for a subnormal.
    const int exponent = lead + kUnitExponent;
    const int low = exponent >= -126 ? lead - 23 : 149;  // the index of the kept unit
    const uint32_t kept = bits_from(digit, low, lead);
    const bool half = low >= 1 && bit_at(digit, low - 1);
    const bool below = low >= 2 && any_below(digit, low - 1);
    uint64_t significand = kept + ((half && (below || (kept & 1u))) ? 1u : 0u);
    int unit = low + kUnitExponent;  // the weight of significand's lowest bit
    if (significand == (uint64_t{1} << 24)) significand >>= 1, ++unit;  // rounded up a binade
    // significand 2^unit, significand < 2^24: an fp32's bits
    const uint32_t sign = negative ? 0x80000000u : 0u;
    if (significand >= (uint64_t{1} << 23)) {  // normal
      const int biased = unit + 23 + 127;
      if (biased >= 0xff) return float_of(sign | 0x7f800000u);
      return float_of(sign | (static_cast<uint32_t>(biased) << 23) | (static_cast<uint32_t>(significand) & 0x7fffffu));
    }
    return float_of(sign | static_cast<uint32_t>(significand));  // subnormal (unit = -149), or zero
  }

 private:
  FPLAB_HOST_DEVICE void special(uint32_t xa, uint32_t xb, bool negative) {
    const bool a_nan = (xa & 0x7fffffffu) > 0x7f800000u, b_nan = (xb & 0x7fffffffu) > 0x7f800000u;
    const bool a_zero = (xa & 0x7fffffffu) == 0, b_zero = (xb & 0x7fffffffu) == 0;
    if (a_nan || b_nan || a_zero || b_zero)
      nan_ = true;
    else
      (negative ? neg_inf_ : pos_inf_) = true;
  }

  // value +-= m 2^(p - 298), m < 2^48, p in [0, 506].
  FPLAB_HOST_DEVICE void add_integer(uint64_t m, int p, bool negative) {
    const int at = p >> 5, shift = p & 31;
    // m << shift is below 2^79: three digits
    const uint64_t low = m << shift;                               // bits 0..63 of the shifted term
    const uint64_t high = shift ? m >> (64 - shift) : 0;           // bits 64..78
    const int64_t d0 = static_cast<int64_t>(low & 0xffffffffu), d1 = static_cast<int64_t>(low >> 32);
    const int64_t d2 = static_cast<int64_t>(high);
    if (negative) {
      limb_[at] -= d0, limb_[at + 1] -= d1;
      if (d2) limb_[at + 2] -= d2;
    } else {
      limb_[at] += d0, limb_[at + 1] += d1;
      if (d2) limb_[at + 2] += d2;
    }
  }

  // Bits [low, high] of the digits (high - low < 32), as an integer.
  FPLAB_HOST_DEVICE static uint32_t bits_from(const uint32_t* digit, int low, int high) {
    uint32_t out = 0;
    for (int i = high; i >= low; --i) out = (out << 1) | (bit_at(digit, i) ? 1u : 0u);
    return out;
  }
  FPLAB_HOST_DEVICE static bool bit_at(const uint32_t* digit, int i) { return (digit[i >> 5] >> (i & 31)) & 1u; }
  // Whether any bit below index i is set.
  FPLAB_HOST_DEVICE static bool any_below(const uint32_t* digit, int i) {
    const int whole = i >> 5;
    for (int d = 0; d < whole; ++d)
      if (digit[d]) return true;
    return (i & 31) && (digit[whole] & ((1u << (i & 31)) - 1u)) != 0;
  }

  int64_t limb_[kLimbs];
  bool nan_ = false, pos_inf_ = false, neg_inf_ = false;
  bool positive_sign_ = false;  // some term's sign was positive (a zero sum is then +0)
  bool any_term_ = false;       // none: the empty sum, +0
};

}  // namespace fplab::sim::gpu
