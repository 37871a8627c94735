// The metrics of each (profile, variant) group of replicas, with the intervals of the bootstrap
// over replicas (replica_bootstrap.hpp): one set of resamples per group, shared by every interval
// of that group.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "experiments/metrics.hpp"
#include "experiments/runner.hpp"

namespace fplab::experiments {

struct GroupSummary {
  std::string profile;
  Variant variant = Variant::control;
  size_t replicas = 0;
  double accuracy_mean = 0;
  SpreadSummary accuracy_sd;
  PairwiseSummary churn, l2;
  std::optional<double> l2_buffers_mean;     // BatchNorm running statistics, when the model has them
  SpreadSummary per_class_sd_max;            // the largest class's sd; its interval: that max, resampled
  std::optional<double> per_class_sd_ratio;  // per_class_sd_max / accuracy sd (none if that is 0)
  bool identical = false;                    // every replica's weights bit-identical
  std::vector<double> class_accuracy_mean, fpr_mean, fpr_sd, fnr_mean, fnr_sd;
  std::vector<SpreadSummary> class_accuracy_sd;
};

// How the intervals were computed (the same for every group of an experiment: same replica count).
struct IntervalMethod {
  bool exact = false;    // every resample enumerated (no seed involved)
  size_t resamples = 0;  // distinct multisets when exact, else seeded draws
  uint64_t seed = 1;
};
IntervalMethod interval_method(size_t replicas);

std::vector<GroupSummary> summarize(const Experiment& experiment, const std::vector<ReplicaRecord>& records,
                                    std::span<const uint8_t> test_labels, size_t classes);

}  // namespace fplab::experiments
