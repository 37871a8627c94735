#include "experiments/replica_bootstrap.hpp"

#include <algorithm>
#include <cmath>

#include "fp/counter_rng.hpp"

namespace fplab::experiments {
namespace {

// C(2n-1, n), the number of multisets of n draws from n replicas, or limit + 1 once it exceeds
// `limit` (it grows like 4^n, so it must not be computed in full).
size_t multisets(size_t n, size_t limit) {
  if (n == 0) return 0;
  double c = 1;  // C(n-1+k, k) for k = 1..n: exact in a double while it stays below the limit
  for (size_t k = 1; k <= n; ++k) {
    c = c * static_cast<double>(n - 1 + k) / static_cast<double>(k);
    if (c > static_cast<double>(limit)) return limit + 1;
  }
  return static_cast<size_t>(std::llround(c));
}

// Every way to put `left` more draws into replicas `at`..n-1, appended to `out` row by row.
void enumerate(std::vector<uint32_t>& row, size_t at, uint32_t left, std::vector<uint32_t>& out) {
  if (at + 1 == row.size()) {
    row[at] = left;
    out.insert(out.end(), row.begin(), row.end());
    return;
  }
  for (uint32_t c = 0; c <= left; ++c) {
    row[at] = c;
    enumerate(row, at + 1, left - c, out);
  }
}

}  // namespace

ReplicaBootstrap::ReplicaBootstrap(size_t replicas, size_t resamples, uint64_t seed) : replicas_(replicas) {
  if (replicas == 0) return;
  const size_t n = replicas;
  exact_ = multisets(n, resamples) <= resamples;
  if (exact_) {
    std::vector<uint32_t> row(n);
    enumerate(row, 0, static_cast<uint32_t>(n), counts_);
    // Probability of a multiset: n! / prod(c_i!) / n^n, in logs so that no factor overflows.
    const double log_total =
        std::lgamma(static_cast<double>(n) + 1) - static_cast<double>(n) * std::log(static_cast<double>(n));
    for (size_t r = 0; r < counts_.size() / n; ++r) {
      double log_p = log_total;
      for (size_t i = 0; i < n; ++i) log_p -= std::lgamma(static_cast<double>(counts_[r * n + i]) + 1);
      weights_.push_back(std::exp(log_p));
    }
    return;
  }
  fp::CounterRng rng(fp::mix_key({seed, 0x7265706c6963}));  // "replic"
  counts_.assign(resamples * n, 0);
  weights_.assign(resamples, 1.0 / static_cast<double>(resamples));
  for (size_t r = 0; r < resamples; ++r)
    for (size_t k = 0; k < n; ++k) ++counts_[r * n + rng.below(n)];
}

Interval ReplicaBootstrap::interval(const Statistic& statistic) const {
  std::vector<std::pair<double, double>> values;  // (statistic, probability)
  double total = 0;
  for (size_t r = 0; r < weights_.size(); ++r) {
    const auto v = statistic(std::span<const uint32_t>(counts_.data() + r * replicas_, replicas_));
    if (!v) continue;
    values.emplace_back(*v, weights_[r]);
    total += weights_[r];
  }
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  // The smallest value whose distribution function reaches q. The tolerance keeps a cumulative
  // probability that is q up to rounding (e.g. 0.025 summed from 1/256ths) on the right side.
  auto quantile = [&](double q) {
    double cumulative = 0;
    for (const auto& [v, p] : values) {
      cumulative += p;
      if (cumulative >= q * total * (1 - 1e-12)) return v;
    }
    return values.back().first;
  };
  return {quantile((1 - kLevel) / 2), quantile((1 + kLevel) / 2)};
}

std::optional<double> resampled_pair_mean(const PairMatrix& d, std::span<const uint32_t> counts) {
  double sum = 0, pairs = 0;
  for (size_t i = 0; i < counts.size(); ++i)
    for (size_t j = i + 1; j < counts.size(); ++j) {
      const double w = static_cast<double>(counts[i]) * counts[j];
      sum += w * d[i][j];
      pairs += w;
    }
  if (pairs == 0) return std::nullopt;
  return sum / pairs;
}

std::optional<double> resampled_stddev(std::span<const double> values, std::span<const uint32_t> counts) {
  double n = 0, total = 0;
  size_t drawn = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    n += counts[i];
    total += counts[i] * values[i];
    drawn += counts[i] > 0;
  }
  if (drawn < 2) return std::nullopt;
  const double m = total / n;
  double s = 0;
  for (size_t i = 0; i < values.size(); ++i) s += counts[i] * (values[i] - m) * (values[i] - m);
  return std::sqrt(s / (n - 1));
}

}  // namespace fplab::experiments
