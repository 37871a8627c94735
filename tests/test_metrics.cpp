// Metrics against small cases computed by hand, and a seeded simulation for the bootstrap.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "experiments/metrics.hpp"

using namespace fplab::experiments;

TEST_CASE("metrics: churn of two label vectors is the fraction that disagree") {
  const std::vector<uint8_t> a = {0, 1, 2, 3, 4, 5, 6, 7}, b = {0, 1, 2, 9, 4, 5, 0, 7};
  CHECK(churn(a, b) == 2.0 / 8);
  CHECK(churn(a, a) == 0);
  CHECK_THROWS(churn(a, std::vector<uint8_t>{1}));
}

TEST_CASE("metrics: mean pairwise churn of three replicas, and identical replicas give exactly 0 and a 0 interval") {
  // pairs: (a,b) 1/4, (a,c) 2/4, (b,c) 3/4 -> mean 1/2
  const std::vector<std::vector<uint8_t>> p = {{0, 0, 0, 0}, {1, 0, 0, 0}, {0, 1, 1, 0}};
  const auto s = churn_summary(p, 200, 3);
  CHECK(s.pairs == 3);
  CHECK(s.mean == Approx(0.5).epsilon(1e-15));
  CHECK(s.ci_low <= s.mean);
  CHECK(s.ci_high >= s.mean);
  const auto same = churn_summary({{1, 2, 3}, {1, 2, 3}, {1, 2, 3}});
  CHECK(same.mean == 0);
  CHECK(same.ci_low == 0);
  CHECK(same.ci_high == 0);
}

TEST_CASE("metrics: the bootstrap 95% interval covers the true churn in about 95% of seeded simulations") {
  // Two replicas disagreeing independently on each example with probability q: true churn q.
  const double q = 0.1;
  std::mt19937_64 g(11);
  std::bernoulli_distribution flip(q);
  int covered = 0;
  const int trials = 200;
  for (int t = 0; t < trials; ++t) {
    std::vector<uint8_t> a(2000, 0), b(2000, 0);
    for (auto& x : b) x = flip(g);
    const auto s = churn_summary({a, b}, 400, static_cast<uint64_t>(t));
    covered += s.ci_low <= q && q <= s.ci_high;
  }
  INFO("covered " << covered << " of " << trials);
  CHECK(covered >= 180);  // 95% nominal; binomial sd ~3 trials
  CHECK(covered <= 198);
}

TEST_CASE("metrics: normalized L2 of known vectors") {
  const std::vector<float> x = {3, 4}, y = {6, 8}, z = {4, -3}, zero = {0, 0};
  CHECK(normalized_l2(x, y) == Approx(0).margin(1e-12));  // same direction
  CHECK(normalized_l2(x, z) == Approx(std::sqrt(2.0)));    // orthogonal unit vectors
  CHECK(normalized_l2(x, zero) == Approx(1));
  CHECK(mean_pairwise_l2({x, y, z}) == Approx((0 + std::sqrt(2.0) + std::sqrt(2.0)) / 3));
}

TEST_CASE("metrics: mean and sample standard deviation") {
  const std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};
  CHECK(mean(v) == 5);
  CHECK(stddev(v) == Approx(std::sqrt(32.0 / 7)));
  CHECK(stddev(std::vector<double>{3}) == 0);
}

TEST_CASE("metrics: per-class accuracy, FPR and FNR of a known confusion") {
  // labels:      0 0 0 0 1 1 1 2
  // predictions: 0 0 1 2 1 1 0 2
  const std::vector<uint8_t> labels = {0, 0, 0, 0, 1, 1, 1, 2}, pred = {0, 0, 1, 2, 1, 1, 0, 2};
  const auto acc = per_class_accuracy(pred, labels, 3);
  CHECK(acc[0] == 0.5);
  CHECK(acc[1] == Approx(2.0 / 3));
  CHECK(acc[2] == 1.0);
  // class 0: TP 2, FN 2, FP 1 (example 6), TN 3 -> FPR 1/4, FNR 2/4
  const auto r0 = error_rates(pred, labels, 0);
  CHECK(r0.fpr == 0.25);
  CHECK(r0.fnr == 0.5);
  // class 2: TP 1, FN 0, FP 1 (example 3), TN 6 -> FPR 1/7, FNR 0
  const auto r2 = error_rates(pred, labels, 2);
  CHECK(r2.fpr == Approx(1.0 / 7));
  CHECK(r2.fnr == 0);
}
