#include "fp/number_text.hpp"

#include <mpfr.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>

#include "fp/format.hpp"
#include "fp/round.hpp"

namespace fplab::fp {
namespace {

struct Mpfr {
  mpfr_t value;
  explicit Mpfr(mpfr_prec_t precision) { mpfr_init2(value, precision); }
  ~Mpfr() { mpfr_clear(value); }
  Mpfr(const Mpfr&) = delete;
  Mpfr& operator=(const Mpfr&) = delete;
};

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

// Reads the whole text into x with the given rounding; returns MPFR's ternary value.
int read(mpfr_t x, std::string_view text, mpfr_rnd_t rounding) {
  const std::string s = trim(text);
  char* end = nullptr;
  const int ternary = s.empty() ? 0 : mpfr_strtofr(x, s.c_str(), &end, 0, rounding);
  // The whole text, NUL bytes included: MPFR stops at the first, which must not make "1<NUL>x" a 1.
  if (s.empty() || end != s.c_str() + s.size())
    throw FormatError("cannot read '" + std::string(text) + "' as a number");
  return ternary;
}

}  // namespace

ExactValue parse_number(std::string_view text) {
  Mpfr x(64);
  const int ternary = read(x.value, text, MPFR_RNDZ);
  // MPFR reads "-nan" as a NaN without a sign; the sign is the user's, so it comes from the text.
  if (mpfr_nan_p(x.value)) return ExactValue::nan(trim(text).starts_with('-'));
  if (mpfr_inf_p(x.value)) return ExactValue::infinity(mpfr_signbit(x.value));
  if (mpfr_zero_p(x.value)) {
    if (ternary != 0) throw FormatError("number '" + std::string(text) + "' is too small to represent");
    return ExactValue::zero(mpfr_signbit(x.value));
  }
  // x = m * 2^e with m a 64-bit integer.
  mpz_t m;
  mpz_init(m);
  const mpfr_exp_t e = mpfr_get_z_2exp(m, x.value);
  mpz_abs(m, m);
  const uint64_t magnitude = mpz_get_ui(m);  // 64 bits: unsigned long is 64-bit on this platform
  mpz_clear(m);
  return ExactValue::from_integer(mpfr_signbit(x.value), magnitude, e, ternary != 0);
}

double parse_double(std::string_view text) {
  Mpfr x(53);
  read(x.value, text, MPFR_RNDN);
  // MPFR keeps 53 bits at every exponent, a double fewer below 2^-1022: there, rounding to 53
  // bits and then to the subnormal grid (mpfr_get_d) would round twice (0x0.637962a741b55p-1022
  // printed shortest read back one ulp off). Such a number is rounded once, from 64 bits and a
  // sticky bit; one too small even for those is a zero of its sign.
  if (mpfr_regular_p(x.value) && mpfr_get_exp(x.value) <= -1021) {
    try {
      return round_exact(parse_number(text), fp64(), {}).value;
    } catch (const FormatError&) {
      return mpfr_signbit(x.value) ? -0.0 : 0.0;
    }
  }
  return mpfr_get_d(x.value, MPFR_RNDN);
}

double difference_from_text(double value, std::string_view text) {
  if (!std::isfinite(value)) return NAN;
  Mpfr x(256), v(256);
  read(x.value, text, MPFR_RNDN);
  if (!mpfr_number_p(x.value)) return NAN;
  mpfr_set_d(v.value, value, MPFR_RNDN);
  mpfr_sub(v.value, v.value, x.value, MPFR_RNDN);
  return mpfr_get_d(v.value, MPFR_RNDN);
}

std::string format_double(double value) {
  if (std::isnan(value)) return std::signbit(value) ? "-nan" : "nan";  // the sign of a NaN is data too
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::string format_hex(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%a", value);
  return buffer;
}

}  // namespace fplab::fp
