// The MPFR oracle: see mpfr_reference.hpp for what it promises and why it is independent.
#include "fp/mpfr_reference.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace fplab::fp::reference {

// ---------------------------------------------------------------------------------------------
// Real

Real::Real(mpfr_prec_t precision) {
  mpfr_init2(value_, precision);
  mpfr_set_zero(value_, 1);
}

Real Real::from_double(double x) {
  Real r(53);
  mpfr_set_d(r.value_, x, MPFR_RNDN);  // exact: 53 bits hold every double
  return r;
}

Real::Real(const Real& other) {
  mpfr_init2(value_, mpfr_get_prec(other.value_));
  mpfr_set(value_, other.value_, MPFR_RNDN);
}

Real::Real(Real&& other) noexcept {
  mpfr_init2(value_, MPFR_PREC_MIN);
  mpfr_swap(value_, other.value_);
}

Real& Real::operator=(const Real& other) {
  if (this != &other) {
    mpfr_set_prec(value_, mpfr_get_prec(other.value_));
    mpfr_set(value_, other.value_, MPFR_RNDN);
  }
  return *this;
}

Real& Real::operator=(Real&& other) noexcept {
  mpfr_swap(value_, other.value_);
  return *this;
}

Real::~Real() { mpfr_clear(value_); }

// ---------------------------------------------------------------------------------------------
// Grid

Grid::Grid(const Format& format) : exp_bits(format.exp_bits), man_bits(format.man_bits), family(format.family) {
  const bool e8m0 = family == Family::exponent;
  if (e8m0 ? exp_bits != 8 || man_bits != 0 : exp_bits < 2 || exp_bits > 11 || man_bits < 1 || man_bits > 52)
    throw std::invalid_argument("reference::Grid: format out of the supported range");
  is_signed = !e8m0;
  subnormals = !e8m0;
  nan = family != Family::finite;
  zero = !e8m0;
  negative_zero = family == Family::ieee || family == Family::fn || family == Family::finite;
  precision = man_bits + 1;
  // IEEE's bias, shifted in fnuz formats (ml_dtypes: e4m3fnuz 8, e5m2fnuz 16, e4m3b11fnuz 11).
  bias = (1 << (exp_bits - 1)) - 1 + format.bias_shift;
  emin = subnormals ? 1 - bias : -bias;
  // The all-ones exponent holds inf/NaN in IEEE-like formats and NaN in e8m0; numbers in the
  // others.
  const int top_field = (1 << exp_bits) - 1;
  emax = (family == Family::ieee || e8m0 ? top_field - 1 : top_field) - bias;
  subnormal_quantum = emin - precision + 1;
  top_quantum = emax - precision + 1;
  const uint64_t all_ones = (uint64_t{1} << precision) - 1;
  // fn formats spend the all-ones significand of the top binade on NaN.
  max_significand = family == Family::fn ? all_ones - 1 : all_ones;
}

double Grid::max_finite() const {
  return std::ldexp(static_cast<double>(max_significand), static_cast<int>(top_quantum));
}
double Grid::min_normal() const { return std::ldexp(1.0, emin); }
double Grid::min_subnormal() const { return std::ldexp(1.0, static_cast<int>(subnormal_quantum)); }

namespace {

uint64_t sign_bit(const Grid& g, bool negative) {
  return negative && g.is_signed ? uint64_t{1} << (g.width() - 1) : 0;
}
uint64_t all_ones_exponent(const Grid& g) { return (uint64_t{1} << g.exp_bits) - 1; }
uint64_t fraction_mask(const Grid& g) { return (uint64_t{1} << g.man_bits) - 1; }

uint64_t pack(const Grid& g, bool negative, uint64_t biased_exponent, uint64_t fraction) {
  return sign_bit(g, negative) | (biased_exponent << g.man_bits) | fraction;
}

uint64_t grid_nan_bits(const Grid& g, bool negative) {
  switch (g.family) {
    case Family::ieee:
      return pack(g, negative, all_ones_exponent(g), uint64_t{1} << (g.man_bits - 1));
    case Family::fn:
      return pack(g, negative, all_ones_exponent(g), fraction_mask(g));
    case Family::fnuz:  // the pattern of -0
      return uint64_t{1} << (g.width() - 1);
    case Family::exponent:
      return all_ones_exponent(g);
    case Family::finite:
      break;
  }
  throw std::invalid_argument("reference: format has no NaN");
}
uint64_t grid_infinity_bits(const Grid& g, bool negative) { return pack(g, negative, all_ones_exponent(g), 0); }

// integer * 2^quantum with integer <= 2^p, brought to integer < 2^p.
void normalise(const Grid& g, uint64_t& integer, int64_t& quantum) {
  if (integer == (uint64_t{1} << g.precision)) {
    integer >>= 1;
    ++quantum;
  }
}

bool above_max(const Grid& g, uint64_t integer, int64_t quantum) {
  // Normalised and nonzero: integer >= 2^(p-1) whenever quantum > subnormal_quantum.
  if (quantum > g.top_quantum) return true;
  return quantum == g.top_quantum && integer > g.max_significand;
}

// Bits of a finite grid value known not to exceed the largest finite.
uint64_t finite_bits(const Grid& g, bool negative, uint64_t integer, int64_t quantum) {
  if (integer == 0) return sign_bit(g, negative);
  const uint64_t hidden = uint64_t{1} << (g.precision - 1);
  if (integer < hidden) {
    if (quantum != g.subnormal_quantum) throw std::logic_error("reference: unnormalised value");
    return pack(g, negative, 0, integer);
  }
  const int64_t exponent = quantum + g.precision - 1;
  return pack(g, negative, static_cast<uint64_t>(exponent + g.bias), integer - hidden);
}

double signed_value(bool negative, double magnitude) { return negative ? -magnitude : magnitude; }

Result nan_result(const Grid& g, bool negative) {
  Result r;
  // Only IEEE and fn NaNs have a sign: fnuz's and e8m0's one NaN is positive.
  const bool signed_nan = negative && (g.family == Family::ieee || g.family == Family::fn);
  r.value = std::copysign(std::numeric_limits<double>::quiet_NaN(), signed_nan ? -1.0 : 1.0);
  r.bits = grid_nan_bits(g, negative);
  return r;
}

Result max_result(const Grid& g, bool negative) {
  Result r;
  r.value = signed_value(negative, g.max_finite());
  const bool top_field_is_special = g.family == Family::ieee || g.family == Family::exponent;
  r.bits = pack(g, negative, top_field_is_special ? all_ones_exponent(g) - 1 : all_ones_exponent(g),
                g.family == Family::fn ? fraction_mask(g) - 1 : fraction_mask(g));
  return r;
}

Result zero_result(const Grid& g, bool negative) {
  Result r;
  const bool kept = negative && g.negative_zero;
  r.value = kept ? -0.0 : 0.0;
  r.bits = sign_bit(g, kept);
  return r;
}

// A value the format cannot hold at all: NaN in fp4/fp6 (no NaN there: a zero with the input's
// sign), zero, negative values and magnitudes below 2^-127 in e8m0 (NaN there, or 2^-127, its
// least value, when saturating).
Result unrepresentable_result(const Grid& g, bool negative, bool saturate) {
  Result r;
  if (!g.zero && saturate) {
    r.value = std::ldexp(1.0, g.emin);
    r.bits = 0;
  } else if (g.nan) {
    r = nan_result(g, negative);
  } else {
    r = zero_result(g, negative);
  }
  r.inexact = true;
  return r;
}

Result infinity_result(const Grid& g, bool negative) {
  Result r;
  r.value = signed_value(negative, std::numeric_limits<double>::infinity());
  r.bits = grid_infinity_bits(g, negative);
  return r;
}

// The result once the mode has chosen integer * 2^quantum (a grid point of the unbounded grid).
// overflow_to_max: the mode rounds this magnitude toward zero, so overflow gives max finite.
// up_to_least: the mode rounds this magnitude up, so a result below e8m0's least value gives it.
Result finish(const Grid& g, bool negative, uint64_t integer, int64_t quantum, bool inexact, bool overflow_to_max,
              bool up_to_least, bool flush_subnormals, bool saturate) {
  normalise(g, integer, quantum);
  if (integer != 0 && above_max(g, integer, quantum)) {
    // Without NaN (MX FP6/FP4) max is all there is to give.
    Result r = (overflow_to_max || saturate || !g.nan) ? max_result(g, negative)
               : g.family != Family::ieee             ? nan_result(g, negative)
                                                      : infinity_result(g, negative);
    r.inexact = true;
    r.overflow = true;
    return r;
  }
  const double magnitude = std::ldexp(static_cast<double>(integer), static_cast<int>(quantum));
  if (!g.subnormals && magnitude < g.min_normal()) {
    Result r = unrepresentable_result(g, negative, saturate || up_to_least);
    r.underflow = true;
    return r;
  }
  Result r;
  if (integer == 0) {
    r = zero_result(g, negative);
  } else {
    r.value = signed_value(negative, magnitude);
    r.bits = finite_bits(g, negative, integer, quantum);
  }
  r.inexact = inexact;
  if (flush_subnormals && integer != 0 && magnitude < g.min_normal()) {
    r = zero_result(g, negative);
    r.inexact = true;
  }
  // IEEE 754's default underflow: a tiny (subnormal or zero) result that is also inexact.
  r.underflow = r.inexact && magnitude < g.min_normal();
  return r;
}

bool is_odd(uint64_t n) { return (n & 1) != 0; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Locating a value on the grid

Position locate(mpfr_srcptr x, const Grid& g) {
  Position pos;
  pos.negative = mpfr_signbit(x) != 0;
  if (mpfr_nan_p(x)) {
    pos.kind = Kind::nan;
    return pos;
  }
  if (mpfr_inf_p(x)) {
    pos.kind = Kind::infinite;
    return pos;
  }
  if (mpfr_zero_p(x)) {
    pos.kind = Kind::zero;
    return pos;
  }
  pos.kind = Kind::finite;
  // MPFR writes x = m * 2^e with 1/2 <= |m| < 1, so x lies in binade e - 1.
  const int64_t binade = static_cast<int64_t>(mpfr_get_exp(x)) - 1;
  // Without subnormals the grid keeps shrinking below emin: finish() judges that range.
  pos.quantum = (g.subnormals ? std::max<int64_t>(binade, g.emin) : binade) - (g.precision - 1);

  Real scaled(mpfr_get_prec(x));
  mpfr_mul_2si(scaled.get(), x, static_cast<long>(-pos.quantum), MPFR_RNDN);  // exact
  mpfr_abs(scaled.get(), scaled.get(), MPFR_RNDN);
  Real low(64);
  mpfr_floor(low.get(), scaled.get());  // below 2^p <= 2^53: exact
  pos.low = mpfr_get_uj(low.get(), MPFR_RNDN);
  pos.exact = mpfr_equal_p(scaled.get(), low.get()) != 0;
  if (!pos.exact) {
    Real midpoint(64);
    mpfr_set_uj(midpoint.get(), pos.low, MPFR_RNDN);
    mpfr_add_d(midpoint.get(), midpoint.get(), 0.5, MPFR_RNDN);  // 54 bits at most: exact
    const int c = mpfr_cmp(scaled.get(), midpoint.get());
    pos.half_cmp = (c > 0) - (c < 0);
  }
  return pos;
}

Position locate(double x, const Grid& g) {
  if (std::isnan(x)) {  // MPFR does not keep the sign of a NaN
    Position pos;
    pos.kind = Kind::nan;
    pos.negative = std::signbit(x);
    return pos;
  }
  const Real r = Real::from_double(x);
  return locate(r.get(), g);
}

// ---------------------------------------------------------------------------------------------
// Rounding

std::vector<Result> round(const Position& x, const Grid& g, Mode mode, bool flush_subnormals, bool saturate) {
  switch (x.kind) {
    case Kind::nan:
      if (!g.nan) return {unrepresentable_result(g, x.negative, saturate)};
      return {nan_result(g, x.negative)};
    case Kind::infinite:
      if (g.family == Family::ieee) return {infinity_result(g, x.negative)};
      if (x.negative && !g.is_signed) return {unrepresentable_result(g, true, saturate)};
      return {saturate || !g.nan ? max_result(g, x.negative) : nan_result(g, x.negative)};
    case Kind::zero:
      if (!g.zero) return {unrepresentable_result(g, x.negative, saturate)};
      return {zero_result(g, x.negative)};
    case Kind::finite:
      if (x.negative && !g.is_signed) return {unrepresentable_result(g, true, saturate)};
      break;
  }
  const bool neg = x.negative;
  const uint64_t lo = x.low, hi = x.low + 1;
  auto pick = [&](uint64_t integer, bool overflow_to_max) {
    return finish(g, neg, integer, x.quantum, !x.exact, overflow_to_max, mode == Mode::ru && !neg, flush_subnormals,
                  saturate);
  };
  if (x.exact) {
    // Only overflow depends on the mode here (a grid point above the largest finite).
    const bool to_max = mode == Mode::rz || mode == Mode::ro || (mode == Mode::ru && neg) || (mode == Mode::rd && !neg);
    return {pick(lo, to_max)};
  }
  switch (mode) {
    case Mode::rne: {
      uint64_t chosen = x.half_cmp < 0 ? lo : x.half_cmp > 0 ? hi : (is_odd(lo) ? hi : lo);
      return {pick(chosen, false)};
    }
    case Mode::rna:
      return {pick(x.half_cmp >= 0 ? hi : lo, false)};
    case Mode::rz:
      return {pick(lo, true)};
    case Mode::ru:
      return {neg ? pick(lo, true) : pick(hi, false)};
    case Mode::rd:
      return {neg ? pick(hi, false) : pick(lo, true)};
    case Mode::ro:
      return {pick(is_odd(lo) ? lo : hi, true)};
    case Mode::sr:
      return {pick(lo, false), pick(hi, false)};
  }
  throw std::logic_error("reference::round: unknown mode");
}

std::vector<Result> round(double x, const Format& format, Mode mode, bool flush_subnormals, bool saturate) {
  const Grid g(format);
  return round(locate(x, g), g, mode, flush_subnormals, saturate);
}

std::vector<Result> round(mpfr_srcptr x, const Format& format, Mode mode, bool flush_subnormals, bool saturate) {
  const Grid g(format);
  return round(locate(x, g), g, mode, flush_subnormals, saturate);
}

std::vector<Result> round(const Exact& x, const Format& format, Mode mode, bool flush_subnormals, bool saturate) {
  const Grid g(format);
  Position pos;
  if (x.kind == Kind::finite) {
    pos = locate(x.value.get(), g);
  } else {
    pos.kind = x.kind;
    pos.negative = x.negative;
  }
  return round(pos, g, mode, flush_subnormals, saturate);
}

// ---------------------------------------------------------------------------------------------
// Bit patterns

double decode(uint64_t bits, const Format& format) {
  const Grid g(format);
  const bool negative = g.is_signed && ((bits >> (g.width() - 1)) & 1) != 0;
  const uint64_t exponent = (bits >> g.man_bits) & all_ones_exponent(g);
  const uint64_t fraction = bits & fraction_mask(g);
  const bool top = exponent == all_ones_exponent(g);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  double magnitude;
  if (g.family == Family::ieee && top) {
    magnitude = fraction == 0 ? std::numeric_limits<double>::infinity() : nan;
  } else if (g.family == Family::fn && top && fraction == fraction_mask(g)) {
    magnitude = nan;
  } else if (g.family == Family::fnuz && negative && exponent == 0 && fraction == 0) {
    return nan;  // the "-0" pattern
  } else if (g.family == Family::exponent) {
    if (top) return nan;
    magnitude = std::ldexp(1.0, static_cast<int>(exponent) - g.bias);
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(fraction), static_cast<int>(g.subnormal_quantum));
  } else {
    const uint64_t integer = (uint64_t{1} << g.man_bits) + fraction;
    magnitude = std::ldexp(static_cast<double>(integer), static_cast<int>(exponent) - g.bias - g.man_bits);
  }
  return std::copysign(magnitude, negative ? -1.0 : 1.0);
}

uint64_t encode(double value, const Format& format) {
  const Grid g(format);
  const bool negative = std::signbit(value);
  if (std::isnan(value)) return grid_nan_bits(g, negative);
  if (std::isinf(value)) {
    if (g.family != Family::ieee) throw std::invalid_argument("reference::encode: no infinity in format");
    return grid_infinity_bits(g, negative);
  }
  const Position pos = locate(value, g);
  if (pos.kind == Kind::zero) {
    if (!g.zero || (negative && !g.negative_zero)) throw std::invalid_argument("reference::encode: no such zero");
    return sign_bit(g, negative);
  }
  if (negative && !g.is_signed) throw std::invalid_argument("reference::encode: unsigned format");
  if (!g.subnormals && std::fabs(value) < g.min_normal())
    throw std::invalid_argument("reference::encode: below the least value");
  uint64_t integer = pos.low;
  int64_t quantum = pos.quantum;
  normalise(g, integer, quantum);
  if (!pos.exact || above_max(g, integer, quantum))
    throw std::invalid_argument("reference::encode: not a value of the format");
  return finite_bits(g, negative, integer, quantum);
}

uint64_t nan_bits(const Format& format, bool negative) { return grid_nan_bits(Grid(format), negative); }
uint64_t infinity_bits(const Format& format, bool negative) { return grid_infinity_bits(Grid(format), negative); }
uint64_t max_finite_bits(const Format& format, bool negative) { return max_result(Grid(format), negative).bits; }

std::vector<double> nonnegative_values(const Format& format) {
  const Grid g(format);
  if (g.width() > 24) throw std::invalid_argument("reference::nonnegative_values: format too wide");
  std::vector<double> values;
  for (uint64_t bits = 0; bits < (uint64_t{1} << (g.is_signed ? g.width() - 1 : g.width())); ++bits) {
    const double v = decode(bits, format);
    if (std::isfinite(v)) values.push_back(v);
  }
  return values;
}

// ---------------------------------------------------------------------------------------------
// Exact arithmetic

namespace {

Exact from_mpfr(Real value) {
  Exact e;
  e.negative = mpfr_signbit(value.get()) != 0;
  if (mpfr_nan_p(value.get())) {
    e.kind = Kind::nan;
  } else if (mpfr_inf_p(value.get())) {
    e.kind = Kind::infinite;
  } else if (mpfr_zero_p(value.get())) {
    e.kind = Kind::zero;
  } else {
    e.kind = Kind::finite;
    e.value = std::move(value);
  }
  return e;
}

// The exact sum of two exact reals: enough precision to hold every bit of both.
Real exact_sum_of(mpfr_srcptr a, mpfr_srcptr b, Mode mode) {
  mpfr_prec_t precision = std::max(mpfr_get_prec(a), mpfr_get_prec(b));
  if (mpfr_regular_p(a) && mpfr_regular_p(b)) {
    const long top = std::max(mpfr_get_exp(a), mpfr_get_exp(b)) + 1;
    const long bottom = std::min(mpfr_get_exp(a) - static_cast<long>(mpfr_get_prec(a)),
                                 mpfr_get_exp(b) - static_cast<long>(mpfr_get_prec(b)));
    precision = std::max<mpfr_prec_t>(precision, top - bottom + 2);
  }
  Real sum(precision);
  // The rounding direction matters only for the sign of an exact zero (IEEE: -0 in rd).
  const int ternary = mpfr_add(sum.get(), a, b, mode == Mode::rd ? MPFR_RNDD : MPFR_RNDN);
  if (ternary != 0) throw std::logic_error("reference: inexact sum");
  return sum;
}

Real exact_product_of(double a, double b) {
  Real product(106);
  const Real ra = Real::from_double(a), rb = Real::from_double(b);
  const int ternary = mpfr_mul(product.get(), ra.get(), rb.get(), MPFR_RNDN);
  if (ternary != 0) throw std::logic_error("reference: inexact product");
  return product;
}

}  // namespace

Exact exact_add(double a, double b, Mode mode) {
  const Real ra = Real::from_double(a), rb = Real::from_double(b);
  return from_mpfr(exact_sum_of(ra.get(), rb.get(), mode));
}

Exact exact_mul(double a, double b, Mode) { return from_mpfr(exact_product_of(a, b)); }

Exact exact_fma(double a, double b, double c, Mode mode) {
  // The product is exact (specials and signed zeros per IEEE), then one exact addition.
  const Real product = exact_product_of(a, b);
  const Real rc = Real::from_double(c);
  return from_mpfr(exact_sum_of(product.get(), rc.get(), mode));
}

void ExactSum::add_special(Kind kind, bool negative) {
  if (kind == Kind::nan) nan_ = true;
  if (kind == Kind::infinite) (negative ? neg_inf_ : pos_inf_) = true;
  if (kind == Kind::zero) (negative ? negative_zero_ : positive_zero_) = true;
}

void ExactSum::add_finite(Real term) { finite_terms_.push_back(std::move(term)); }

void ExactSum::add(double x) {
  ++term_count_;
  if (std::isnan(x)) return add_special(Kind::nan, false);
  if (std::isinf(x)) return add_special(Kind::infinite, x < 0);
  if (x == 0) return add_special(Kind::zero, std::signbit(x));
  add_finite(Real::from_double(x));
}

void ExactSum::add_product(double a, double b) {
  ++term_count_;
  const Exact p = from_mpfr(exact_product_of(a, b));
  if (p.kind == Kind::finite) return add_finite(p.value);
  add_special(p.kind, p.negative);
}

void ExactSum::add_scaled(bool negative, uint64_t magnitude, int scale) {
  if (magnitude == 0) return;  // adds nothing, not even a signed zero
  ++term_count_;
  Real term(64);
  mpfr_set_uj(term.get(), magnitude, MPFR_RNDN);
  mpfr_mul_2si(term.get(), term.get(), scale, MPFR_RNDN);
  if (negative) mpfr_neg(term.get(), term.get(), MPFR_RNDN);
  add_finite(std::move(term));
}

Exact ExactSum::value(Mode mode) const {
  Exact e;
  if (nan_ || (pos_inf_ && neg_inf_)) {
    e.kind = Kind::nan;
    return e;
  }
  if (pos_inf_ || neg_inf_) {
    e.kind = Kind::infinite;
    e.negative = neg_inf_;
    return e;
  }
  // IEEE 754 for a sum of many terms: zeros of one sign keep it; a sum of zeros of both signs,
  // or of nonzero terms that cancel, is +0, or -0 when rounding down; no terms at all is +0.
  auto exact_zero = [&] {
    e.kind = Kind::zero;
    if (!finite_terms_.empty() || (positive_zero_ && negative_zero_))
      e.negative = mode == Mode::rd;
    else
      e.negative = negative_zero_;
    return e;
  };
  if (finite_terms_.empty()) return exact_zero();

  // Every term is a multiple of 2^bottom and below 2^top, so the sum fits in
  // top - bottom + log2(n) + 1 bits.
  long top = std::numeric_limits<long>::min(), bottom = std::numeric_limits<long>::max();
  std::vector<mpfr_ptr> pointers;
  pointers.reserve(finite_terms_.size());
  for (const Real& t : finite_terms_) {
    top = std::max(top, static_cast<long>(mpfr_get_exp(t.get())));
    bottom = std::min(bottom, static_cast<long>(mpfr_get_exp(t.get())) - static_cast<long>(mpfr_get_prec(t.get())));
    pointers.push_back(const_cast<mpfr_ptr>(t.get()));
  }
  const long carry_bits = std::bit_width(finite_terms_.size()) + 2;
  Real sum(top - bottom + carry_bits);
  const int ternary = mpfr_sum(sum.get(), pointers.data(), pointers.size(), MPFR_RNDN);
  if (ternary != 0) throw std::logic_error("reference: inexact mpfr_sum");
  if (mpfr_zero_p(sum.get())) return exact_zero();
  e.kind = Kind::finite;
  e.negative = mpfr_signbit(sum.get()) != 0;
  e.value = std::move(sum);
  return e;
}

Exact exact_dot(const float* a, const float* b, size_t n, Mode mode) {
  ExactSum sum;
  for (size_t i = 0; i < n; ++i) sum.add_product(a[i], b[i]);
  return sum.value(mode);
}

Top64 top64(mpfr_srcptr x) {
  if (!mpfr_regular_p(x)) throw std::invalid_argument("reference::top64: not finite nonzero");
  Top64 t;
  t.exponent = static_cast<int64_t>(mpfr_get_exp(x)) - 1;
  Real truncated(64);
  t.sticky = mpfr_abs(truncated.get(), x, MPFR_RNDZ) != 0;
  mpfr_mul_2si(truncated.get(), truncated.get(), static_cast<long>(63 - t.exponent), MPFR_RNDN);
  t.significand = mpfr_get_uj(truncated.get(), MPFR_RNDN);
  return t;
}

}  // namespace fplab::fp::reference
