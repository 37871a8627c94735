#include "experiments/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "fp/counter_rng.hpp"

namespace fplab::experiments {

double churn(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  if (a.size() != b.size()) throw std::invalid_argument("churn: prediction vectors differ in length");
  if (a.empty()) return 0;
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
  return static_cast<double>(differ) / static_cast<double>(a.size());
}

ChurnSummary churn_summary(const std::vector<std::vector<uint8_t>>& p, size_t resamples, uint64_t seed) {
  ChurnSummary s;
  const size_t r = p.size();
  if (r < 2) return s;
  const size_t n = p[0].size();
  for (const auto& v : p)
    if (v.size() != n) throw std::invalid_argument("churn: prediction vectors differ in length");
  s.pairs = r * (r - 1) / 2;
  // The mean churn over pairs is the mean over examples of (disagreeing pairs) / pairs, so a
  // bootstrap over examples only needs each example's count.
  std::vector<uint32_t> disagreeing(n, 0);
  for (size_t i = 0; i < r; ++i)
    for (size_t j = i + 1; j < r; ++j)
      for (size_t e = 0; e < n; ++e) disagreeing[e] += p[i][e] != p[j][e];
  const double scale = 1.0 / (static_cast<double>(s.pairs) * static_cast<double>(n));
  s.mean = static_cast<double>(std::accumulate(disagreeing.begin(), disagreeing.end(), uint64_t{0})) * scale;
  if (n == 0 || resamples == 0) {
    s.ci_low = s.ci_high = s.mean;
    return s;
  }
  fp::CounterRng rng(fp::mix_key({seed, 0x626f6f74}));
  std::vector<double> means(resamples);
  for (auto& m : means) {
    uint64_t total = 0;
    for (size_t k = 0; k < n; ++k) total += disagreeing[rng.below(n)];
    m = static_cast<double>(total) * scale;
  }
  std::sort(means.begin(), means.end());
  auto quantile = [&](double q) {  // linear interpolation between order statistics
    const double at = q * static_cast<double>(resamples - 1);
    const auto lo = static_cast<size_t>(std::floor(at));
    const size_t hi = std::min(lo + 1, resamples - 1);
    return means[lo] + (at - static_cast<double>(lo)) * (means[hi] - means[lo]);
  };
  s.ci_low = quantile(0.025);
  s.ci_high = quantile(0.975);
  return s;
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

double mean_pairwise_l2(const std::vector<std::vector<float>>& w) {
  double total = 0;
  size_t pairs = 0;
  for (size_t i = 0; i < w.size(); ++i)
    for (size_t j = i + 1; j < w.size(); ++j, ++pairs) total += normalized_l2(w[i], w[j]);
  return pairs ? total / static_cast<double>(pairs) : 0;
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
  if (predictions.size() != labels.size()) throw std::invalid_argument("accuracy: predictions and labels differ in length");
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
