// The slow, independent reference for fp/: rounding of exact reals to any Format in every mode,
// bit patterns from their definition, and exact sums, products and dot products, all computed
// with MPFR. The tests hold the fast code in fp/ against it.
//
// Independence (the point of this file):
// - nothing here calls fp/'s implementation; from Format it reads only exp_bits, man_bits,
//   family and bias_shift, and recomputes every derived quantity (emin, emax, largest finite,
//   which patterns are NaN, whether -0 exists, ...) from the families' definitions;
// - rounding never uses MPFR's rounding to a precision or its exponent range: the value is
//   scaled by the grid spacing, its integer neighbours are taken with mpfr_floor, and the mode
//   picks one of them by comparing with the midpoint, exactly as the specification reads;
// - it is written to be obviously right, not fast (a few microseconds per rounding).
//
// Assumptions: 2 <= exp_bits <= 11 and 1 <= man_bits <= 52, or e8m0's 8 and 0 (every format
// value is a double);
// MPFR's default exponent range (about +-2^30) holds every value used here (|exponent| < 5000).
#pragma once

// <stdint.h> before <mpfr.h> enables MPFR's intmax_t functions (mpfr_get_uj, mpfr_set_uj).
#include <stdint.h>

#include <mpfr.h>

#include <array>
#include <cstdint>
#include <vector>

#include "fp/format.hpp"
#include "fp/rounding.hpp"

namespace fplab::fp::reference {

// Owner of one mpfr_t; starts as +0.
class Real {
 public:
  explicit Real(mpfr_prec_t precision = 64);
  static Real from_double(double x);  // exact (53 bits)
  Real(const Real& other);
  Real(Real&& other) noexcept;
  Real& operator=(const Real& other);
  Real& operator=(Real&& other) noexcept;
  ~Real();

  mpfr_ptr get() { return value_; }
  mpfr_srcptr get() const { return value_; }

 private:
  mpfr_t value_;
};

// The facts of a format, recomputed from its three defining fields.
struct Grid {
  explicit Grid(const Format& format);

  int exp_bits, man_bits;
  Family family;
  bool is_signed;     // e8m0 has no sign bit
  bool subnormals;    // e8m0 has none: its zero exponent field is the normal 2^-bias
  bool nan;           // MX FP6/FP4 have no NaN
  bool negative_zero; // fnuz spends the -0 pattern on its NaN; e8m0 has no zero
  bool zero;
  int precision;  // p = man_bits + 1
  int bias, emin, emax;
  int64_t subnormal_quantum;  // spacing below 2^emin: 2^(emin - p + 1)
  int64_t top_quantum;        // spacing in the top binade: 2^(emax - p + 1)
  uint64_t max_significand;   // largest finite = max_significand * 2^top_quantum

  int width() const { return (is_signed ? 1 : 0) + exp_bits + man_bits; }
  double max_finite() const;
  double min_normal() const;
  double min_subnormal() const;
};

enum class Kind : uint8_t { zero, finite, infinite, nan };

// Where a real number lies on the format's grid, continued without bound above emax.
// For finite x: |x| is in [low, low + 1] * 2^quantum with low an integer significand
// (0 <= low < 2^p; below 2^emin quantum is the subnormal spacing).
struct Position {
  Kind kind = Kind::zero;
  bool negative = false;
  uint64_t low = 0;
  int64_t quantum = 0;
  bool exact = true;
  int half_cmp = 0;  // inexact only: sign of |x| / 2^quantum - (low + 1/2)
};

Position locate(mpfr_srcptr x, const Grid& grid);
Position locate(double x, const Grid& grid);

// One rounded result with the flags fp/round.hpp promises.
struct Result {
  double value = 0;
  uint64_t bits = 0;
  bool inexact = false;
  bool overflow = false;
  bool underflow = false;  // tiny and inexact: rounded (before flushing) below 2^emin
};

// The results a rounding may give: one for the deterministic modes, {from the neighbour toward
// zero, from the neighbour away from zero} for Mode::sr (equal when x is on the grid).
std::vector<Result> round(const Position& x, const Grid& grid, Mode mode, bool flush_subnormals, bool saturate);
std::vector<Result> round(double x, const Format& format, Mode mode, bool flush_subnormals, bool saturate);
std::vector<Result> round(mpfr_srcptr x, const Format& format, Mode mode, bool flush_subnormals, bool saturate);

// Bit patterns from their definition.
double decode(uint64_t bits, const Format& format);
// Throws std::invalid_argument unless value is a value of the format (or a NaN).
uint64_t encode(double value, const Format& format);
uint64_t nan_bits(const Format& format, bool negative);
uint64_t infinity_bits(const Format& format, bool negative);
uint64_t max_finite_bits(const Format& format, bool negative);
// Every finite value of the format with a clear sign bit, ascending: +0, subnormals, normals.
std::vector<double> nonnegative_values(const Format& format);

// An exact real, or an IEEE special, as an exact computation produces it.
struct Exact {
  Kind kind = Kind::zero;
  bool negative = false;
  Real value{64};  // finite: the exact value (its precision is whatever makes it exact)
};

// Exact sum of doubles and of exact products of doubles. The sign of an exact zero follows
// IEEE 754 (and mpfr_sum): +0 for no terms; zeros of one sign keep that sign; otherwise (zeros
// of both signs, or cancellation) -0 in rd, +0 in the other modes. Any NaN, inf - inf, or
// inf * 0 gives NaN.
class ExactSum {
 public:
  void add(double x);
  void add_product(double a, double b);
  void add_scaled(bool negative, uint64_t magnitude, int scale);  // magnitude * 2^scale
  Exact value(Mode mode) const;
  size_t terms() const { return term_count_; }

 private:
  void add_special(Kind kind, bool negative);
  void add_finite(Real term);  // nonzero

  std::vector<Real> finite_terms_;
  size_t term_count_ = 0;
  bool positive_zero_ = false, negative_zero_ = false;
  bool nan_ = false, pos_inf_ = false, neg_inf_ = false;
};

// Exact a + b, a * b and a * b + c with IEEE's rules for specials and for the sign of an exact
// zero (which depends on the mode only through rd).
Exact exact_add(double a, double b, Mode mode);
Exact exact_mul(double a, double b, Mode mode);
Exact exact_fma(double a, double b, double c, Mode mode);
// Exact sum of a[i] * b[i].
Exact exact_dot(const float* a, const float* b, size_t n, Mode mode);

std::vector<Result> round(const Exact& x, const Format& format, Mode mode, bool flush_subnormals, bool saturate);

// ExactValue's description of a finite nonzero value: |x| = significand * 2^(exponent - 63)
// + tail, top bit of significand set, sticky = (tail > 0).
struct Top64 {
  int64_t exponent = 0;
  uint64_t significand = 0;
  bool sticky = false;
};
Top64 top64(mpfr_srcptr x);

}  // namespace fplab::fp::reference
