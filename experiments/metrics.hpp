// The metrics of the research (docs/architecture.md, "Metrics"), on the results of a group of replicas:
// prediction churn with a bootstrap interval, distance between normalised final weights,
// accuracy spread, per-class spread and one-vs-rest error rates.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace fplab::experiments {

// Fraction of examples whose predicted labels differ. Sizes must match.
double churn(std::span<const uint8_t> a, std::span<const uint8_t> b);

struct ChurnSummary {
  double mean = 0;           // mean over all replica pairs
  double ci_low = 0, ci_high = 0;  // bootstrap 95% interval (examples resampled with replacement)
  size_t pairs = 0;
};
// Over all pairs of the replicas' prediction vectors; `resamples` bootstrap draws from `seed`.
ChurnSummary churn_summary(const std::vector<std::vector<uint8_t>>& predictions, size_t resamples = 1000,
                           uint64_t seed = 1);

// || w1 / ||w1|| - w2 / ||w2|| || (0 if both are zero vectors).
double normalized_l2(std::span<const float> w1, std::span<const float> w2);
// Mean over all pairs.
double mean_pairwise_l2(const std::vector<std::vector<float>>& weights);

double mean(std::span<const double> x);
// Sample standard deviation (n - 1); 0 for fewer than two values.
double stddev(std::span<const double> x);

// Per class c of `classes`: accuracy on the examples labelled c.
std::vector<double> per_class_accuracy(std::span<const uint8_t> predictions, std::span<const uint8_t> labels,
                                       size_t classes);

// One-vs-rest error rates of class c: FPR = FP / (FP + TN), FNR = FN / (FN + TP) (0 when the
// denominator is 0).
struct ErrorRates {
  double fpr = 0, fnr = 0;
};
ErrorRates error_rates(std::span<const uint8_t> predictions, std::span<const uint8_t> labels, uint8_t cls);

}  // namespace fplab::experiments
