// The metrics of the research (docs/architecture.md, "Metrics"), on the results of a group of replicas:
// prediction churn and the distance between normalised final weights (each with an interval of
// the bootstrap over replicas), accuracy spread, per-class spread and one-vs-rest error rates.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "experiments/replica_bootstrap.hpp"

namespace fplab::experiments {

// Fraction of examples whose predicted labels differ. Sizes must match.
double churn(std::span<const uint8_t> a, std::span<const uint8_t> b);

// A pairwise metric (churn, L2) of a group: its mean over all pairs of replicas and the interval of
// the bootstrap over replicas (replica_bootstrap.hpp: replicas resampled, pairs of a replica drawn
// twice left out; the test examples are the fixed test set, not resampled).
struct PairwiseSummary {
  double mean = 0;                 // mean over all replica pairs
  double ci_low = 0, ci_high = 0;  // 95% bootstrap interval over replicas
  size_t pairs = 0;
};
// `bootstrap` must be made for as many replicas as there are vectors.
PairwiseSummary churn_summary(const std::vector<std::vector<uint8_t>>& predictions, const ReplicaBootstrap& bootstrap);
PairwiseSummary l2_summary(const std::vector<std::vector<float>>& weights, const ReplicaBootstrap& bootstrap);

// A sample standard deviation over replicas with its 95% bootstrap interval over replicas.
struct SpreadSummary {
  double sd = 0;
  double ci_low = 0, ci_high = 0;
};
SpreadSummary stddev_summary(std::span<const double> values, const ReplicaBootstrap& bootstrap);

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
