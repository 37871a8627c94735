// Exact accumulation of doubles and of exact products, rounded once at the end.
//
// Assumptions: the host int64_t is two's complement and >> on it is arithmetic (C++20
// guarantees both). The accumulator is a fixed-point number covering every product of two
// doubles (weights 2^-2176 .. 2^2176), kept as 32-bit digits in int64 words (xsum's "small
// accumulator" layout): each add touches a few words without carrying, and carries are
// propagated only every 2^30 adds and before reading the value.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "fp/exact_value.hpp"
#include "fp/format.hpp"
#include "fp/round.hpp"
#include "fp/rounding.hpp"

namespace fplab::fp {

class SuperAccumulator {
 public:
  static constexpr int kDigitBits = 32;
  static constexpr int kLowestExponent = -2176;  // weight of bit 0 of digit 0
  static constexpr int kDigits = 136;            // covers up to 2^2176

  void clear();
  void add(double x);
  // Adds a * b exactly (the 106-bit product), for any doubles.
  void add_product(double a, double b);
  // Adds magnitude * 2^scale with the given sign, exactly; magnitude may use all 128 bits.
  // scale must keep the value inside the accumulator's range (checked).
  void add_scaled(bool negative, unsigned __int128 magnitude, int scale);
  void add(const SuperAccumulator& other);

  // The exact sum, or inf/NaN per IEEE rules. An exact zero is signed as IEEE 754 (and
  // mpfr_sum) do: -0 if every term was -0; otherwise +0, except in rd when some term was
  // nonzero or -0. An empty accumulator is +0.
  ExactValue value(Mode mode = Mode::rne) const;
  Rounded round(const Format& format, const RoundingOptions& options) const {
    return round_exact(value(options.mode), format, options);
  }

  bool has_nan() const { return nan_ || (pos_inf_ && neg_inf_); }

  // The exact sum as plain decimal text, every digit ("5050", "-0.375",
  // "0.1000000000000000055511151231257827021181583404541015625"): a sum of doubles is a dyadic rational, so its decimal
  // expansion ends (it may run to thousands of digits for tiny or huge values). "inf", "-inf", "nan" as value()
  // decides; zero signed as value(rne) signs it.
  std::string decimal_text() const;

 private:
  void add_digits(bool negative, unsigned __int128 magnitude, int scale);
  void carry_propagate();

  void note_zero(bool negative) { (negative ? negative_zero_ : positive_zero_) = true; }

  std::array<int64_t, kDigits> digits_{};
  uint64_t adds_since_carry_ = 0;
  // What IEEE's sign-of-zero rule needs: which zero terms and whether any nonzero term came.
  bool nonzero_term_ = false, positive_zero_ = false, negative_zero_ = false;
  bool nan_ = false, pos_inf_ = false, neg_inf_ = false;
};

}  // namespace fplab::fp
