// Judging computed sums against the exact one: error, ulps, and the classical bound.
#pragma once

#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "fp/format.hpp"
#include "fp/rounding.hpp"
#include "fp/superaccumulator.hpp"

namespace fplab::app {

class Judge {
 public:
  // The exact sum of `terms`, and its value rounded once to `format` (nearest-even for sr).
  Judge(std::span<const double> terms, const fp::Format& format, fp::Mode mode);
  // The same for the exact dot product: the terms are the products a[i] * b[i], each exact
  // (a.size() == b.size()).
  Judge(std::span<const double> a, std::span<const double> b, const fp::Format& format, fp::Mode mode);

  // Errors are measured from the exact sum, not from its rounding: the rounding is what the best
  // possible order gives, and is itself up to half an ulp away.
  const std::string& exact_text() const { return exact_text_; }  // every digit
  double exact() const { return exact_; }                        // nearest double
  double exact_rounded() const { return exact_rounded_; }
  // The exact sum is beyond the format's range: its correct rounding is inf (or NaN/the largest
  // finite value, as the format and mode say).
  bool exact_rounded_overflows() const { return exact_rounded_overflow_; }
  double sum_of_magnitudes() const { return sum_of_magnitudes_; }
  double error(double value) const;  // value - exact sum, rounded once to a double
  double ulps(double value) const { return error(value) / ulp_; }
  // An ulp of the format at the exact sum (at the largest finite value when the sum is beyond it,
  // so that finite results still get an error in ulps).
  double ulp() const { return ulp_; }

 private:
  void finish(const fp::Format& format, fp::Mode mode);  // everything but the sum itself

  fp::SuperAccumulator sum_;
  std::string exact_text_;
  double exact_ = 0, exact_rounded_ = 0, ulp_ = 0, sum_of_magnitudes_ = 0;
  bool exact_rounded_overflow_ = false;
};

// The JSON fields every command judging a sum prints: exact (nearest double), exact_text (every
// digit), correctly_rounded(_text), correctly_rounded_overflow, error_from ("exact").
void add_exact_fields(nlohmann::json& out, const Judge& judge);
// What a sum's exact value is the exact sum of: the terms as the format holds them (the inputs
// rounded to it first: the best any order of additions in the format can give), or the inputs as
// given (each read as the nearest double: the best the format can say of their sum).
enum class ExactOf { terms, inputs };

// "the exact sum" lines for the terminal, each starting with `indent` and a label `width` wide:
// the exact sum, its correct rounding (or overflow), and what errors are measured from.
void print_exact_lines(const Judge& judge, const fp::Format& format, const char* indent, int width,
                       ExactOf of = ExactOf::terms);
// A computed value's error for the terminal: "+2 = +1.000 ulps", or "overflow" for an infinite
// result of finite terms.
std::string error_text(const Judge& judge, double value);

// The exact text for a terminal: whole when short, else its first digits and a marker saying how
// many were left out (JSON carries the whole text).
std::string shortened_exact_text(const std::string& text, size_t keep = 40);

// Unit roundoff: half an ulp of 1 for nearest modes, a whole one otherwise.
double unit_roundoff(const fp::Format& format, fp::Mode mode);
// gamma(depth) * sum|x|: bounds the error of any summation in which no term passes through more
// than `depth` roundings (depth = n - 1 for recursive summation). inf when depth*u >= 1.
double error_bound(size_t depth, double unit_roundoff, double sum_of_magnitudes);

}  // namespace fplab::app
