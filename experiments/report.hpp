// From replica records to the experiment's results: per (profile, variant) summaries, and the
// files of the output folder (summary.json, replicas.csv, per_class.csv, pairs.csv, report.md,
// report.html, figures/*.png|svg), each written atomically.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "experiments/metrics.hpp"
#include "experiments/runner.hpp"

namespace fplab::experiments {

struct GroupSummary {
  std::string profile;
  Variant variant = Variant::control;
  size_t replicas = 0;
  double accuracy_mean = 0, accuracy_std = 0;
  ChurnSummary churn;
  double l2_mean = 0;
  std::optional<double> l2_buffers_mean;      // BatchNorm running statistics, when the model has them
  double per_class_std_max = 0;
  std::optional<double> per_class_std_ratio;  // per_class_std_max / accuracy_std (none if that is 0)
  bool identical = false;                     // every replica's weights bit-identical
  std::vector<double> class_accuracy_mean, class_accuracy_std, fpr_mean, fpr_std, fnr_mean, fnr_std;
};

std::vector<GroupSummary> summarize(const Experiment& experiment, const std::vector<ReplicaRecord>& records,
                                    std::span<const uint8_t> test_labels, size_t classes = 10);

nlohmann::json summary_json(const Experiment& experiment, const std::vector<GroupSummary>& groups);
std::string summary_table(const std::vector<GroupSummary>& groups);  // for the terminal
// The terminal tables' cells, shared by summary_table and twin_table (twin_replicas.hpp):
// "73.28 ± 0.60" (fractions as percent), "3.35 [3.09, 3.63]", and three significant digits.
std::string accuracy_cell(double mean, double sd);
std::string churn_cell(const ChurnSummary& churn);
std::string short_number(double v);

// Writes every result file into `out_dir`; `command` is the command line, quoted in the report.
void write_results(const Experiment& experiment, const std::vector<ReplicaRecord>& records,
                   const std::vector<GroupSummary>& groups, const std::vector<std::string>& class_names,
                   const std::string& out_dir, const std::string& command);

}  // namespace fplab::experiments
