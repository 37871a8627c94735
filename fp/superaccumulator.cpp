#include "fp/superaccumulator.hpp"

#include <gmp.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "fp/ieee_bits.hpp"

namespace fplab::fp {

using u128 = unsigned __int128;

namespace {
// Each add puts at most 2^32 - 1 into a digit; 2^30 adds keep every digit inside int64.
constexpr uint64_t kAddsBeforeCarry = uint64_t{1} << 30;
constexpr int kTopExponent = SuperAccumulator::kLowestExponent + SuperAccumulator::kDigits * 32;
}  // namespace

void SuperAccumulator::clear() { *this = SuperAccumulator{}; }

void SuperAccumulator::add_digits(bool negative, u128 magnitude, int scale) {
  if (++adds_since_carry_ >= kAddsBeforeCarry) {
    carry_propagate();
    adds_since_carry_ = 1;
  }
  nonzero_term_ = true;
  const int position = scale - kLowestExponent;
  int index = position / kDigitBits;
  const int shift = position % kDigitBits;
  const int64_t sign = negative ? -1 : 1;
  digits_[index] += sign * static_cast<int64_t>(static_cast<uint64_t>(magnitude << shift) & 0xffffffffu);
  magnitude >>= (kDigitBits - shift);
  while (magnitude != 0) {
    ++index;
    digits_[index] += sign * static_cast<int64_t>(static_cast<uint64_t>(magnitude) & 0xffffffffu);
    magnitude >>= kDigitBits;
  }
}

void SuperAccumulator::add(double x) {
  const auto parts = split_double(x);
  if (!parts.finite) {
    if (std::isnan(x))
      nan_ = true;
    else
      (parts.negative ? neg_inf_ : pos_inf_) = true;
    return;
  }
  if (parts.significand == 0) return note_zero(parts.negative);
  add_digits(parts.negative, parts.significand, parts.scale);
}

void SuperAccumulator::add_product(double a, double b) {
  const auto x = split_double(a), y = split_double(b);
  const bool negative = x.negative != y.negative;
  if (!x.finite || !y.finite) {
    if (std::isnan(a) || std::isnan(b) || x.significand == 0 || y.significand == 0)
      nan_ = true;
    else
      (negative ? neg_inf_ : pos_inf_) = true;
    return;
  }
  if (x.significand == 0 || y.significand == 0) return note_zero(negative);
  add_digits(negative, static_cast<u128>(x.significand) * y.significand, x.scale + y.scale);
}

void SuperAccumulator::add_scaled(bool negative, u128 magnitude, int scale) {
  if (scale < kLowestExponent || scale + 128 > kTopExponent - 64)
    throw std::out_of_range("SuperAccumulator::add_scaled: scale outside the accumulator");
  if (magnitude == 0) return;
  add_digits(negative, magnitude, scale);
}

void SuperAccumulator::add(const SuperAccumulator& other) {
  SuperAccumulator rhs = other;
  rhs.carry_propagate();
  carry_propagate();
  for (int i = 0; i < kDigits; ++i) digits_[i] += rhs.digits_[i];
  adds_since_carry_ = 2;
  nonzero_term_ |= rhs.nonzero_term_;
  positive_zero_ |= rhs.positive_zero_;
  negative_zero_ |= rhs.negative_zero_;
  nan_ |= rhs.nan_;
  pos_inf_ |= rhs.pos_inf_;
  neg_inf_ |= rhs.neg_inf_;
}

void SuperAccumulator::carry_propagate() {
  for (int i = 0; i + 1 < kDigits; ++i) {
    const int64_t carry = digits_[i] >> kDigitBits;  // arithmetic shift: floor division
    digits_[i] -= carry * (int64_t{1} << kDigitBits);
    digits_[i + 1] += carry;
  }
  adds_since_carry_ = 0;
}

ExactValue SuperAccumulator::value(Mode mode) const {
  if (has_nan()) return ExactValue::nan();
  if (pos_inf_ || neg_inf_) return ExactValue::infinity(neg_inf_);

  SuperAccumulator copy = *this;
  copy.carry_propagate();
  auto& d = copy.digits_;
  const bool negative = d[kDigits - 1] < 0;
  if (negative) {  // magnitude of a two's-complement-like digit string: negate and re-carry
    for (auto& digit : d) digit = -digit;
    copy.carry_propagate();
  }
  int top = kDigits - 1;
  while (top >= 0 && d[top] == 0) --top;
  if (top < 0) {
    if (nonzero_term_) return ExactValue::zero(mode == Mode::rd);
    if (!positive_zero_ && negative_zero_) return ExactValue::zero(true);
    return ExactValue::zero(mode == Mode::rd && negative_zero_);
  }
  // A 96-bit window from the top digit down; lower digits only contribute sticky.
  u128 window = 0;
  for (int i = top; i > top - 3; --i) window = (window << kDigitBits) | static_cast<uint64_t>(i >= 0 ? d[i] : 0);
  bool sticky = false;
  for (int i = top - 3; i >= 0 && !sticky; --i) sticky = d[i] != 0;
  return ExactValue::from_integer(negative, window, kLowestExponent + (top - 2) * kDigitBits, sticky);
}

std::string SuperAccumulator::decimal_text() const {
  const ExactValue v = value();
  switch (v.kind) {
    case ExactValue::Kind::nan:
      return "nan";
    case ExactValue::Kind::infinite:
      return v.negative ? "-inf" : "inf";
    case ExactValue::Kind::zero:
      return v.negative ? "-0" : "0";
    case ExactValue::Kind::finite:
      break;
  }
  SuperAccumulator copy = *this;
  copy.carry_propagate();
  auto& d = copy.digits_;
  if (v.negative) {  // the magnitude, as value() takes it
    for (auto& digit : d) digit = -digit;
    copy.carry_propagate();
  }
  // magnitude = N * 2^kLowestExponent with N the digit string; N * 2^-k = N * 5^k / 10^k.
  mpz_t n, five;
  mpz_init(n);
  mpz_init(five);
  for (int i = kDigits - 1; i >= 0; --i) {
    mpz_mul_2exp(n, n, kDigitBits);
    mpz_add_ui(n, n, static_cast<unsigned long>(d[i]));
  }
  const auto zeros = static_cast<long>(mpz_scan1(n, 0));  // drop trailing binary zeros: no trailing decimal zeros
  mpz_fdiv_q_2exp(n, n, zeros);
  const long exponent = kLowestExponent + zeros;
  long fraction_digits = 0;
  if (exponent >= 0) {
    mpz_mul_2exp(n, n, exponent);
  } else {
    fraction_digits = -exponent;
    mpz_ui_pow_ui(five, 5, fraction_digits);
    mpz_mul(n, n, five);
  }
  const std::unique_ptr<char, void (*)(void*)> raw(mpz_get_str(nullptr, 10, n), std::free);
  mpz_clear(n);
  mpz_clear(five);
  std::string digits = raw.get();
  if (fraction_digits > 0) {
    if (static_cast<long>(digits.size()) <= fraction_digits) digits.insert(0, fraction_digits - digits.size() + 1, '0');
    digits.insert(digits.size() - fraction_digits, ".");
  }
  return v.negative ? "-" + digits : digits;
}

}  // namespace fplab::fp
