#include "experiments/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace fplab::experiments {

double churn(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  if (a.size() != b.size()) throw std::invalid_argument("churn: prediction vectors differ in length");
  if (a.empty()) return 0;
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
  return static_cast<double>(differ) / static_cast<double>(a.size());
}

double normalized_l2(std::span<const float> w1, std::span<const float> w2) {
  if (w1.size() != w2.size()) throw std::invalid_argument("l2: weight vectors differ in length");
  double n1 = 0, n2 = 0;
  for (size_t i = 0; i < w1.size(); ++i) {
    n1 += static_cast<double>(w1[i]) * w1[i];
    n2 += static_cast<double>(w2[i]) * w2[i];
  }
  n1 = std::sqrt(n1);
  n2 = std::sqrt(n2);
  double d = 0;
  for (size_t i = 0; i < w1.size(); ++i) {
    const double x = (n1 > 0 ? w1[i] / n1 : 0.0) - (n2 > 0 ? w2[i] / n2 : 0.0);
    d += x * x;
  }
  return std::sqrt(d);
}

namespace {

// d[i][j] = metric(i, j) for every pair; `vectors` must all have the same length.
template <class T, class Metric>
PairMatrix pair_matrix(const std::vector<std::vector<T>>& vectors, Metric metric) {
  PairMatrix d(vectors.size(), std::vector<double>(vectors.size(), 0));
  for (size_t i = 0; i < vectors.size(); ++i)
    for (size_t j = i + 1; j < vectors.size(); ++j) d[i][j] = d[j][i] = metric(vectors[i], vectors[j]);
  return d;
}

// The mean over all pairs (0 without a pair).
double pair_mean(const PairMatrix& d) {
  double total = 0;
  size_t pairs = 0;
  for (size_t i = 0; i < d.size(); ++i)
    for (size_t j = i + 1; j < d.size(); ++j, ++pairs) total += d[i][j];
  return pairs ? total / static_cast<double>(pairs) : 0;
}

PairMatrix l2_matrix(const std::vector<std::vector<float>>& w) {
  return pair_matrix(w, [](const auto& a, const auto& b) { return normalized_l2(a, b); });
}

PairwiseSummary pairwise_summary(const PairMatrix& d, const ReplicaBootstrap& bootstrap) {
  if (bootstrap.replicas() != d.size())
    throw std::invalid_argument("bootstrap: made for a different number of replicas");
  PairwiseSummary s;
  const size_t r = d.size();
  if (r < 2) return s;
  s.pairs = r * (r - 1) / 2;
  s.mean = pair_mean(d);
  const auto ci = bootstrap.interval([&](std::span<const uint32_t> counts) { return resampled_pair_mean(d, counts); });
  s.ci_low = ci.low;
  s.ci_high = ci.high;
  return s;
}

}  // namespace

PairwiseSummary churn_summary(const std::vector<std::vector<uint8_t>>& p, const ReplicaBootstrap& bootstrap) {
  return pairwise_summary(pair_matrix(p, [](const auto& a, const auto& b) { return churn(a, b); }), bootstrap);
}

PairwiseSummary l2_summary(const std::vector<std::vector<float>>& w, const ReplicaBootstrap& bootstrap) {
  return pairwise_summary(l2_matrix(w), bootstrap);
}

double mean_pairwise_l2(const std::vector<std::vector<float>>& w) { return pair_mean(l2_matrix(w)); }

SpreadSummary stddev_summary(std::span<const double> values, const ReplicaBootstrap& bootstrap) {
  if (bootstrap.replicas() != values.size())
    throw std::invalid_argument("bootstrap: made for a different number of replicas");
  SpreadSummary s;
  s.sd = stddev(values);
  const auto ci =
      bootstrap.interval([&](std::span<const uint32_t> counts) { return resampled_stddev(values, counts); });
  s.ci_low = ci.low;
  s.ci_high = ci.high;
  return s;
}

double mean(std::span<const double> x) {
  return x.empty() ? 0 : std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

double stddev(std::span<const double> x) {
  if (x.size() < 2) return 0;
  const double m = mean(x);
  double s = 0;
  for (double v : x) s += (v - m) * (v - m);
  return std::sqrt(s / static_cast<double>(x.size() - 1));
}

std::vector<double> per_class_accuracy(std::span<const uint8_t> predictions, std::span<const uint8_t> labels,
                                       size_t classes) {
  if (predictions.size() != labels.size())
    throw std::invalid_argument("accuracy: predictions and labels differ in length");
  std::vector<double> correct(classes, 0), count(classes, 0);
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= classes) throw std::invalid_argument("accuracy: label out of range");
    count[labels[i]] += 1;
    correct[labels[i]] += predictions[i] == labels[i];
  }
  for (size_t c = 0; c < classes; ++c) correct[c] = count[c] > 0 ? correct[c] / count[c] : 0;
  return correct;
}

ErrorRates error_rates(std::span<const uint8_t> predictions, std::span<const uint8_t> labels, uint8_t cls) {
  if (predictions.size() != labels.size()) throw std::invalid_argument("error rates: sizes differ");
  double tp = 0, fp = 0, tn = 0, fn = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const bool actual = labels[i] == cls, predicted = predictions[i] == cls;
    tp += actual && predicted;
    fn += actual && !predicted;
    fp += !actual && predicted;
    tn += !actual && !predicted;
  }
  return {fp + tn > 0 ? fp / (fp + tn) : 0, fn + tp > 0 ? fn / (fn + tp) : 0};
}

}  // namespace fplab::experiments
