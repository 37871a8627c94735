#include "apps/judge.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "apps/cli_support.hpp"
#include "fp/number_text.hpp"

namespace fplab::app {

Judge::Judge(std::span<const double> terms, const fp::Format& format, fp::Mode mode) {
  for (double t : terms) {
    sum_.add(t);
    sum_of_magnitudes_ += std::fabs(t);
  }
  finish(format, mode);
}

Judge::Judge(std::span<const double> a, std::span<const double> b, const fp::Format& format, fp::Mode mode) {
  for (size_t i = 0; i < a.size(); ++i) {
    sum_.add_product(a[i], b[i]);
    sum_of_magnitudes_ += std::fabs(a[i] * b[i]);
  }
  finish(format, mode);
}

void Judge::finish(const fp::Format& format, fp::Mode mode) {
  exact_text_ = sum_.decimal_text();
  exact_ = sum_.round(fp::fp64(), {}).value;
  const fp::Rounded rounded = sum_.round(format, {mode == fp::Mode::sr ? fp::Mode::rne : mode});
  exact_rounded_ = rounded.value;
  exact_rounded_overflow_ = rounded.overflow;
  ulp_ = std::isnan(exact_) ? NAN : format.ulp(std::min(std::fabs(exact_), format.max_finite()));
}

double Judge::error(double value) const {
  // Specials: an infinite exact sum (inf terms) matched is no error; inf - finite is inf; NaN stays NaN.
  if (!std::isfinite(value) || !std::isfinite(exact_)) return value == exact_ ? 0.0 : value - exact_;
  fp::SuperAccumulator difference = sum_;
  difference.add(-value);
  return 0.0 - difference.round(fp::fp64(), {}).value;  // 0 - x: an exact result prints as +0
}

void add_exact_fields(nlohmann::json& out, const Judge& judge) {
  out["exact"] = json_number(judge.exact());
  out["exact_text"] = judge.exact_text();
  out["correctly_rounded"] = json_number(judge.exact_rounded());
  out["correctly_rounded_text"] = fp::format_double(judge.exact_rounded());
  out["correctly_rounded_overflow"] = judge.exact_rounded_overflows();
  out["error_from"] = "exact";
}

void print_exact_lines(const Judge& judge, const fp::Format& format, const char* indent, int width, ExactOf of) {
  std::printf("%s%-*s %s%s\n", indent, width, "exact sum", shortened_exact_text(judge.exact_text()).c_str(),
              of == ExactOf::inputs ? " (of the inputs as given, each read as the nearest double)" : "");
  if (judge.exact_rounded_overflows())
    std::printf("%s%-*s overflow: beyond %s's largest finite value %s (rounds to %s)\n", indent, width, "rounded",
                format.name.c_str(), fp::format_double(format.max_finite()).c_str(),
                fp::format_double(judge.exact_rounded()).c_str());
  else
    std::printf("%s%-*s %s (the exact sum%s rounded once to %s%s)\n", indent, width, "rounded",
                fp::format_double(judge.exact_rounded()).c_str(), of == ExactOf::inputs ? " of the inputs" : "",
                format.name.c_str(), of == ExactOf::inputs ? "" : ": the best any order can give");
  std::printf("%s%-*s from the exact sum, in ulps of %s there\n", indent, width, "errors", format.name.c_str());
}

std::string error_text(const Judge& judge, double value) {
  if (std::isinf(value) && std::isfinite(judge.exact())) return "overflow";
  char buffer[96];
  // An exact sum of 0 has the smallest subnormal as its ulp: billions of billions of them say less
  // than the plain error does.
  if (judge.exact() == 0 && value != 0)
    std::snprintf(buffer, sizeof buffer, "%+.6g (the exact sum is 0)", judge.error(value));
  else
    std::snprintf(buffer, sizeof buffer, "%+.6g = %+.3f ulps", judge.error(value), judge.ulps(value));
  return buffer;
}

std::string shortened_exact_text(const std::string& text, size_t keep) {
  if (text.size() <= keep + 20) return text;
  // Scientific form from the first significant digit, so that tiny values do not show as zeros.
  const bool negative = text[0] == '-';
  const std::string magnitude = text.substr(negative);
  const size_t point = std::min(magnitude.find('.'), magnitude.size());
  std::string digits;
  for (char c : magnitude)
    if (c != '.') digits += c;
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return text;
  const long exponent = static_cast<long>(point) - static_cast<long>(first) - 1;
  digits.erase(0, first);
  if (digits.size() <= keep) return text;
  return (negative ? "-" : "") + digits.substr(0, 1) + "." + digits.substr(1, keep - 1) + "...[" +
         std::to_string(digits.size() - keep) + " more digits; --json has them all]e" + std::to_string(exponent);
}

double unit_roundoff(const fp::Format& format, fp::Mode mode) {
  const bool nearest = mode == fp::Mode::rne || mode == fp::Mode::rna;
  return std::ldexp(1.0, nearest ? -format.man_bits - 1 : -format.man_bits);
}

double error_bound(size_t depth, double u, double sum_of_magnitudes) {
  const double ku = static_cast<double>(depth) * u;
  return ku < 1 ? ku / (1 - ku) * sum_of_magnitudes : INFINITY;
}

}  // namespace fplab::app
