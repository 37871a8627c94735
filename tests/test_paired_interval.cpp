// experiments/paired_interval: the t interval of paired differences against hand-computed cases
// (t quantiles from printed tables), its coverage on seeded normal samples, and its refusals.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "experiments/paired_interval.hpp"

using fplab::experiments::paired_t_interval;

TEST_CASE("paired t interval: hand-computed cases") {
  // Two units: mean 2, standard error 1, t(0.975; 1 df) = 12.7062.
  const std::vector<double> two = {1, 3};
  const auto a = paired_t_interval(two);
  CHECK(a.units == 2);
  CHECK(a.mean == 2);
  CHECK(a.low == Approx(2 - 12.7062047).epsilon(1e-8));
  CHECK(a.high == Approx(2 + 12.7062047).epsilon(1e-8));
  // Six units: sample sd by hand, t(0.975; 5 df) = 2.5706; t(0.95; 5 df) = 2.0150 for a 90% level.
  const std::vector<double> six = {0.1, -0.2, 0.3, 0.05, -0.1, 0.25};
  const double mean = 0.4 / 6;
  double squares = 0;
  for (const double d : six) squares += (d - mean) * (d - mean);
  const double se = std::sqrt(squares / 5 / 6);
  const auto b = paired_t_interval(six);
  CHECK(b.mean == Approx(mean).epsilon(1e-12));
  CHECK(b.high - b.mean == Approx(2.5705818 * se).epsilon(1e-7));
  CHECK(b.mean - b.low == Approx(2.5705818 * se).epsilon(1e-7));
  const auto c = paired_t_interval(six, 0.90);
  CHECK(c.high - c.mean == Approx(2.0150484 * se).epsilon(1e-7));
  // No spread: the interval is the point.
  const std::vector<double> same = {0.5, 0.5, 0.5};
  const auto d = paired_t_interval(same);
  CHECK(d.low == 0.5);
  CHECK(d.high == 0.5);
}

TEST_CASE("paired t interval: 95% coverage on normal samples of four units") {
  std::mt19937_64 g(11);
  std::normal_distribution<double> normal(0.3, 1.0);
  const int trials = 4000;
  int covered = 0;
  std::vector<double> sample(4);
  for (int t = 0; t < trials; ++t) {
    for (auto& x : sample) x = normal(g);
    const auto i = paired_t_interval(sample);
    covered += i.low <= 0.3 && 0.3 <= i.high;
  }
  // Binomial sd of the share: 0.0034; the z interval (1.96 standard errors) would cover ~0.86.
  CHECK(covered / double(trials) > 0.94);
  CHECK(covered / double(trials) < 0.96);
}

TEST_CASE("paired t interval: refusals in one line") {
  using Catch::Matchers::Contains;
  const std::vector<double> one = {1.0};
  CHECK_THROWS_WITH(paired_t_interval(one), Contains("at least two differences"));
  const std::vector<double> nan = {1.0, std::nan("")};
  CHECK_THROWS_WITH(paired_t_interval(nan), Contains("finite"));
  const std::vector<double> two = {1.0, 2.0};
  CHECK_THROWS_WITH(paired_t_interval(two, 1.0), Contains("strictly between 0 and 1"));
}
