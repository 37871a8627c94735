// Metrics against small cases computed by hand, and the bootstrap over replicas against a brute-force
// enumeration of every resample written independently here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "experiments/metrics.hpp"

using namespace fplab::experiments;

TEST_CASE("metrics: churn of two label vectors is the fraction that disagree") {
  const std::vector<uint8_t> a = {0, 1, 2, 3, 4, 5, 6, 7}, b = {0, 1, 2, 9, 4, 5, 0, 7};
  CHECK(churn(a, b) == 2.0 / 8);
  CHECK(churn(a, a) == 0);
  CHECK_THROWS(churn(a, std::vector<uint8_t>{1}));
}

TEST_CASE("metrics: churn of three replicas: mean over pairs, and the replica bootstrap worked by hand") {
  // pairs: (a,b) 1/4, (a,c) 2/4, (b,c) 3/4 -> mean 1/2.
  // Resampling 3 replicas from {a,b,c}: 27 equally likely ordered draws. 3 draw one replica only
  // (no pair of different replicas: left out); 18 draw two replicas, e.g. {a,a,b}, whose only
  // distinct pairs are (a,b): 6 draws each for churn 1/4, 2/4, 3/4; 6 draw all three: mean 1/2.
  // Of the 24 kept: 1/4 w.p. 6/24, 1/2 w.p. 12/24, 3/4 w.p. 6/24 -> 95% interval [1/4, 3/4].
  const std::vector<std::vector<uint8_t>> p = {{0, 0, 0, 0}, {1, 0, 0, 0}, {0, 1, 1, 0}};
  const ReplicaBootstrap bootstrap(3);
  CHECK(bootstrap.exact());
  CHECK(bootstrap.resamples() == 10);  // C(5, 3) multisets
  const auto s = churn_summary(p, bootstrap);
  CHECK(s.pairs == 3);
  CHECK(s.mean == Approx(0.5).epsilon(1e-15));
  CHECK(s.ci_low == 0.25);
  CHECK(s.ci_high == 0.75);
  const auto same = churn_summary({{1, 2, 3}, {1, 2, 3}, {1, 2, 3}}, bootstrap);
  CHECK(same.mean == 0);
  CHECK(same.ci_low == 0);
  CHECK(same.ci_high == 0);
  CHECK_THROWS(churn_summary(p, ReplicaBootstrap(4)));
}

namespace {

// The exact bootstrap distribution by brute force, independently of ReplicaBootstrap: every one of
// the n^n equally likely ordered draws of n replicas, the statistic computed on the drawn list.
std::vector<double> all_draws(size_t n,
                              const std::function<std::optional<double>(const std::vector<size_t>&)>& statistic) {
  std::vector<double> values;
  std::vector<size_t> draw(n, 0);
  for (;;) {
    if (const auto v = statistic(draw)) values.push_back(*v);
    size_t k = 0;
    while (k < n && ++draw[k] == n) draw[k++] = 0;
    if (k == n) break;
  }
  std::sort(values.begin(), values.end());
  return values;
}

// The smallest value whose share of draws at or below it reaches q = 1/40 or 39/40, in integers.
std::pair<double, double> interval_of(const std::vector<double>& sorted) {
  const size_t n = sorted.size();
  size_t lo = 0, hi = 0;
  while (40 * (lo + 1) < n) ++lo;
  while (40 * (hi + 1) < 39 * n) ++hi;
  // ties: the order statistic reached is the value itself
  return {sorted[lo], sorted[hi]};
}

double sample_sd(const std::vector<double>& x) {
  double m = 0, s = 0;
  for (double v : x) m += v / static_cast<double>(x.size());
  for (double v : x) s += (v - m) * (v - m);
  return std::sqrt(s / static_cast<double>(x.size() - 1));
}

}  // namespace

TEST_CASE(
    "metrics: the intervals of churn, L2 and accuracy sd are the bootstrap over replicas, checked by brute force") {
  // Four replicas' predictions on 12 test examples, made so that the pairwise churns spread
  // (1/12 .. 6/12): resampling test examples (the old interval) gives a different, narrower answer.
  const std::vector<std::vector<uint8_t>> p = {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1},
                                               {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 2},
                                               {0, 1, 2, 3, 4, 5, 6, 7, 1, 1, 1, 2},
                                               {0, 1, 2, 9, 9, 9, 6, 7, 8, 9, 3, 1}};
  const std::vector<std::vector<float>> w = {{1, 0, 0}, {1, 0.1f, 0}, {0.9f, 0.3f, 0.1f}, {0.5f, 0.5f, 0.5f}};
  const std::vector<double> accuracy = {0.71, 0.74, 0.70, 0.78};
  const ReplicaBootstrap bootstrap(4, 100000, 123);
  REQUIRE(bootstrap.exact());

  auto distinct_pair_mean = [](const std::vector<size_t>& draw, const std::function<double(size_t, size_t)>& d) {
    double total = 0;
    size_t pairs = 0;
    for (size_t a = 0; a < draw.size(); ++a)
      for (size_t b = a + 1; b < draw.size(); ++b)
        if (draw[a] != draw[b]) total += d(draw[a], draw[b]), ++pairs;
    return pairs ? std::optional<double>(total / static_cast<double>(pairs)) : std::nullopt;
  };
  auto differing = [&](size_t i, size_t j) {
    double n = 0;
    for (size_t e = 0; e < p[i].size(); ++e) n += p[i][e] != p[j][e];
    return n / static_cast<double>(p[i].size());
  };
  const auto churn_interval =
      interval_of(all_draws(4, [&](const auto& draw) { return distinct_pair_mean(draw, differing); }));
  const auto c = churn_summary(p, bootstrap);
  CHECK(c.ci_low == Approx(churn_interval.first).epsilon(1e-12));
  CHECK(c.ci_high == Approx(churn_interval.second).epsilon(1e-12));
  CHECK(c.ci_low < c.mean);
  CHECK(c.ci_high > c.mean);

  const auto l2_interval = interval_of(all_draws(4, [&](const auto& draw) {
    return distinct_pair_mean(draw, [&](size_t i, size_t j) { return normalized_l2(w[i], w[j]); });
  }));
  const auto l = l2_summary(w, bootstrap);
  CHECK(l.mean == Approx(mean_pairwise_l2(w)).epsilon(1e-15));
  CHECK(l.ci_low == Approx(l2_interval.first).epsilon(1e-12));
  CHECK(l.ci_high == Approx(l2_interval.second).epsilon(1e-12));

  // sd: a replica drawn k times counts k times; a draw of one replica only is left out.
  const auto sd_interval = interval_of(all_draws(4, [&](const auto& draw) {
    std::vector<double> drawn;
    for (size_t i : draw) drawn.push_back(accuracy[i]);
    if (std::count(draw.begin(), draw.end(), draw[0]) == 4) return std::optional<double>();
    return std::optional<double>(sample_sd(drawn));
  }));
  const auto sd = stddev_summary(accuracy, bootstrap);
  CHECK(sd.sd == Approx(stddev(accuracy)));
  CHECK(sd.ci_low == Approx(sd_interval.first).epsilon(1e-12));
  CHECK(sd.ci_high == Approx(sd_interval.second).epsilon(1e-12));
  CHECK(sd.ci_high > sd.sd);
}

TEST_CASE("metrics: beyond exact enumeration the replica bootstrap is seeded Monte Carlo, deterministic per seed") {
  // 12 replicas: C(23, 12) = 1 352 078 multisets, more than the resamples asked for.
  std::vector<double> accuracy;
  for (int i = 0; i < 12; ++i) accuracy.push_back(0.7 + 0.01 * ((i * 7) % 12));
  const ReplicaBootstrap a(12, 4000, 5), b(12, 4000, 5), other(12, 4000, 6);
  CHECK_FALSE(a.exact());
  CHECK(a.resamples() == 4000);
  const auto sa = stddev_summary(accuracy, a), sb = stddev_summary(accuracy, b), so = stddev_summary(accuracy, other);
  CHECK(sa.ci_low == sb.ci_low);
  CHECK(sa.ci_high == sb.ci_high);
  CHECK(sa.ci_low < sa.sd);
  CHECK(sa.ci_high > sa.sd);
  CHECK(so.ci_low == Approx(sa.ci_low).margin(0.003));  // another seed: the same interval up to noise
  CHECK(so.ci_high == Approx(sa.ci_high).margin(0.003));
}

TEST_CASE("metrics: normalized L2 of known vectors") {
  const std::vector<float> x = {3, 4}, y = {6, 8}, z = {4, -3}, zero = {0, 0};
  CHECK(normalized_l2(x, y) == Approx(0).margin(1e-12));  // same direction
  CHECK(normalized_l2(x, z) == Approx(std::sqrt(2.0)));   // orthogonal unit vectors
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
