#include "experiments/twin_replicas.hpp"

#include <cstdio>
#include <numeric>

#include "experiments/report.hpp"
#include "util/sha256.hpp"

namespace fplab::experiments {

TwinGroup run_twin_group(const Experiment& experiment, const models::Dataset& data, Variant variant, size_t replicas,
                         const models::torch_twin::TwinOptions& options, const TwinTrainer& train,
                         const std::function<void(size_t, const TwinReplica&)>& progress) {
  TwinGroup group;
  group.mode = options.deterministic ? "deterministic" : "default";
  group.variant = variant;
  std::vector<std::vector<uint8_t>> predictions;
  std::vector<std::vector<float>> weights;
  std::vector<double> accuracy;
  for (size_t i = 0; i < replicas; ++i) {
    // The twin reads no schedules: empty op tables.
    const models::TrainConfig config = experiment.replica_config({}, {}, variant, i);
    models::torch_twin::TwinResult r = train(config, data, options);
    TwinReplica replica;
    replica.algo_seed = config.algo_seed;
    replica.test_accuracy = r.test_accuracy;
    replica.seconds = std::accumulate(r.epoch_seconds.begin(), r.epoch_seconds.end(), 0.0);
    replica.weights_sha256 = util::sha256_hex(r.weights.data(), r.weights.size() * sizeof(float));
    replica.predictions_sha256 = util::sha256_hex(r.predictions.data(), r.predictions.size());
    if (i == 0) group.backend = r.backend;
    accuracy.push_back(r.test_accuracy);
    predictions.push_back(std::move(r.predictions));
    weights.push_back(std::move(r.weights));
    group.replicas.push_back(replica);
    if (progress) progress(i, replica);
  }
  group.accuracy_mean = mean(accuracy);
  group.accuracy_sd = stddev(accuracy);
  group.churn = churn_summary(predictions, ReplicaBootstrap(predictions.size()));
  group.l2 = mean_pairwise_l2(weights);
  group.identical = group.replicas.size() >= 2;  // one replica proves nothing
  for (const auto& r : group.replicas)
    group.identical = group.identical && r.weights_sha256 == group.replicas[0].weights_sha256 &&
                      r.predictions_sha256 == group.replicas[0].predictions_sha256;
  return group;
}

std::string twin_table(const std::vector<TwinGroup>& groups) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-14s %-10s %3s  %-16s %-26s %-10s %-9s %s\n", "mode", "variant", "n", "accuracy %",
                "churn % [95% CI, replicas]", "L2", "identical", "s/replica");
  out += line;
  for (const auto& g : groups) {
    const std::string acc = accuracy_cell(g.accuracy_mean, g.accuracy_sd);
    const std::string churn = g.churn.pairs == 0 ? "-" : churn_cell(g.churn);  // one replica: no pair
    double seconds = 0;
    for (const auto& r : g.replicas) seconds += r.seconds;
    std::snprintf(line, sizeof line, "%-14s %-10s %3zu  %-16s %-26s %-10s %-9s %.2f\n", g.mode.c_str(),
                  variant_name(g.variant).c_str(), g.replicas.size(), acc.c_str(), churn.c_str(),
                  short_number(g.l2).c_str(), g.identical ? "yes" : "no",
                  g.replicas.empty() ? 0.0 : seconds / static_cast<double>(g.replicas.size()));
    out += line;
  }
  return out;
}

}  // namespace fplab::experiments
