#include "experiments/paired_interval.hpp"

#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <stdexcept>
#include <string>

namespace fplab::experiments {

PairedInterval paired_t_interval(std::span<const double> differences, double level) {
  const size_t n = differences.size();
  if (n < 2)
    throw std::invalid_argument("a paired interval needs at least two differences (units), got " + std::to_string(n));
  if (!(level > 0 && level < 1))
    throw std::invalid_argument("a paired interval's level lies strictly between 0 and 1, got " + std::to_string(level));
  double sum = 0;
  for (const double d : differences) {
    if (!std::isfinite(d)) throw std::invalid_argument("a paired interval's differences must be finite");
    sum += d;
  }
  const double mean = sum / static_cast<double>(n);
  double squares = 0;
  for (const double d : differences) squares += (d - mean) * (d - mean);
  const double standard_error = std::sqrt(squares / static_cast<double>(n - 1) / static_cast<double>(n));
  const boost::math::students_t_distribution<double> t(static_cast<double>(n - 1));
  const double quantile = boost::math::quantile(boost::math::complement(t, (1 - level) / 2));
  return {mean, mean - quantile * standard_error, mean + quantile * standard_error, n};
}

}  // namespace fplab::experiments
