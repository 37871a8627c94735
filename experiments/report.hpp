// From the group summaries to the files of the output folder: summary.json, replicas.csv,
// per_class.csv, pairs.csv, report.md and report.html (the same document, report_document.hpp)
// and figures/*.{png,svg,pdf} (report_figures.hpp), each written atomically.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "experiments/group_summary.hpp"
#include "experiments/runner.hpp"

namespace fplab::experiments {

// Where the results came from, recorded in summary.json and in both reports.
struct Provenance {
  std::string command;  // the exact command line, shell-quoted
  std::string version;  // util::version() of the fplab that ran it
};

// {"experiment", "description", "fplab_version", "command", "recipe", "intervals", "results"}.
nlohmann::json summary_json(const Experiment& experiment, const std::vector<GroupSummary>& groups,
                            const Provenance& provenance);
std::string summary_table(const std::vector<GroupSummary>& groups);  // for the terminal
// The terminal tables' cells, shared by summary_table and twin_table (twin_replicas.hpp):
// "73.28 ± 0.60" (fractions as percent), "3.35 [3.09, 3.63]", and three significant digits.
std::string accuracy_cell(double mean, double sd);
std::string churn_cell(const PairwiseSummary& churn);
std::string short_number(double v);

// Writes every result file into `out_dir`.
void write_results(const Experiment& experiment, const std::vector<ReplicaRecord>& records,
                   const std::vector<GroupSummary>& groups, const std::vector<std::string>& class_names,
                   const std::string& out_dir, const Provenance& provenance);

}  // namespace fplab::experiments
