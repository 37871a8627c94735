#include "experiments/group_summary.hpp"

#include <algorithm>

namespace fplab::experiments {
namespace {

constexpr size_t kResamples = 100000;  // exact enumeration up to 10 replicas (92 378 multisets)
constexpr uint64_t kSeed = 1;

}  // namespace

IntervalMethod interval_method(size_t replicas) {
  const ReplicaBootstrap b(replicas, kResamples, kSeed);
  return {b.exact(), b.resamples(), kSeed};
}

std::vector<GroupSummary> summarize(const Experiment& x, const std::vector<ReplicaRecord>& records,
                                    std::span<const uint8_t> labels, size_t classes) {
  std::vector<GroupSummary> out;
  for (const auto& profile : x.profiles)
    for (Variant v : x.variants) {
      std::vector<const ReplicaRecord*> group;
      for (const auto& r : records)
        if (r.profile == profile && r.variant == v) group.push_back(&r);
      GroupSummary g;
      g.profile = profile;
      g.variant = v;
      g.replicas = group.size();
      std::vector<double> accuracy;
      std::vector<std::vector<uint8_t>> predictions;
      std::vector<std::vector<float>> weights, buffers;
      std::vector<std::vector<double>> class_acc(classes), fpr(classes), fnr(classes);
      g.identical = true;
      for (const auto* r : group) {
        accuracy.push_back(r->test_accuracy);
        predictions.push_back(r->predictions);
        weights.push_back(r->weights);
        if (!r->buffers.empty()) buffers.push_back(r->buffers);
        g.identical = g.identical && r->weights_sha256 == group.front()->weights_sha256;
        const auto per_class = per_class_accuracy(r->predictions, labels, classes);
        for (size_t c = 0; c < classes; ++c) {
          class_acc[c].push_back(per_class[c]);
          const auto e = error_rates(r->predictions, labels, static_cast<uint8_t>(c));
          fpr[c].push_back(e.fpr);
          fnr[c].push_back(e.fnr);
        }
      }
      const ReplicaBootstrap bootstrap(group.size(), kResamples, kSeed);
      g.accuracy_mean = mean(accuracy);
      g.accuracy_sd = stddev_summary(accuracy, bootstrap);
      g.churn = churn_summary(predictions, bootstrap);
      g.l2 = l2_summary(weights, bootstrap);
      if (!buffers.empty()) g.l2_buffers_mean = mean_pairwise_l2(buffers);
      for (size_t c = 0; c < classes; ++c) {
        g.class_accuracy_mean.push_back(mean(class_acc[c]));
        g.class_accuracy_sd.push_back(stddev_summary(class_acc[c], bootstrap));
        g.fpr_mean.push_back(mean(fpr[c]));
        g.fpr_sd.push_back(stddev(fpr[c]));
        g.fnr_mean.push_back(mean(fnr[c]));
        g.fnr_sd.push_back(stddev(fnr[c]));
        g.per_class_sd_max.sd = std::max(g.per_class_sd_max.sd, g.class_accuracy_sd.back().sd);
      }
      // The interval of the max is the max recomputed on each resample (the class that is largest
      // may change between resamples), not the interval of today's largest class.
      const auto max_ci = bootstrap.interval([&](std::span<const uint32_t> counts) -> std::optional<double> {
        std::optional<double> largest;
        for (const auto& values : class_acc)
          if (const auto sd = resampled_stddev(values, counts)) largest = std::max(largest.value_or(0), *sd);
        return largest;
      });
      g.per_class_sd_max.ci_low = max_ci.low;
      g.per_class_sd_max.ci_high = max_ci.high;
      if (g.accuracy_sd.sd > 0) g.per_class_sd_ratio = g.per_class_sd_max.sd / g.accuracy_sd.sd;
      out.push_back(std::move(g));
    }
  return out;
}

}  // namespace fplab::experiments
