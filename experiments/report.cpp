#include "experiments/report.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <sstream>

#include "experiments/recipe.hpp"
#include "experiments/report_document.hpp"
#include "experiments/report_figures.hpp"
#include "util/whole_file.hpp"
#include "util/external_program.hpp"

namespace fplab::experiments {
namespace {

nlohmann::json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

std::string fixed(double v, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, v);
  return buffer;
}
std::string percent(double v, int digits = 2) { return fixed(100 * v, digits); }

// "0.70 [0.31, 0.95]" in percent; the interval cell of the reports.
std::string with_interval(double value, double low, double high) {
  return percent(value) + " [" + percent(low) + ", " + percent(high) + "]";
}
std::string spread_cell(const SpreadSummary& s) { return with_interval(s.sd, s.ci_low, s.ci_high); }
std::string l2_cell(const PairwiseSummary& l2) {
  return short_number(l2.mean) + " [" + short_number(l2.ci_low) + ", " + short_number(l2.ci_high) + "]";
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d", std::gmtime(&now));
  return buffer;
}

// What every interval covers, for the reports (docs/experiments.md says the same).
std::string interval_text(const IntervalMethod& m) {
  return "Every interval is a 95% percentile bootstrap over replicas: a resample draws the group's replicas with "
         "replacement and recomputes the statistic; the test examples are the fixed test set and are not resampled. "
         "For churn and L2, a pair made of one replica drawn twice is left out (a replica compared with itself "
         "measures nothing); for the standard deviations a replica drawn k times counts k times; a resample that "
         "drew a single replica (no pair, no spread) is left out of every interval. " +
         (m.exact ? "All " + std::to_string(m.resamples) +
                        " distinct resamples were enumerated with their probabilities (exact; no seed)."
                  : std::to_string(m.resamples) + " resamples were drawn with seed " + std::to_string(m.seed) + ".") +
         " With few replicas these intervals are coarse and tend to be too narrow: more replicas, not more "
         "resamples, make them trustworthy.";
}

std::string class_name(const std::vector<std::string>& names, size_t c) {
  return c < names.size() ? names[c] : std::to_string(c);
}

ReportDocument report_document(const Experiment& x, const std::vector<GroupSummary>& groups,
                               const std::vector<std::string>& class_names, const std::vector<ReportFigure>& figures,
                               const std::string& figure_note, const Provenance& provenance) {
  ReportDocument d;
  d.title = x.name;
  if (!x.description.empty()) d.paragraph(x.description);
  if (!x.paper.empty()) d.paragraph(x.paper, "What the research found:");
  d.paragraph(recipe_text(x), "Recipe:");

  const bool buffers =
      std::any_of(groups.begin(), groups.end(), [](const auto& g) { return g.l2_buffers_mean.has_value(); });
  std::vector<std::string> header = {
      "profile",          "variant",    "replicas", "accuracy % (mean)", "accuracy sd % [95% CI]",
      "churn % [95% CI]", "L2 [95% CI]"};
  if (buffers) header.push_back("L2 of BatchNorm statistics");
  for (const char* h : {"max per-class sd % [95% CI]", "ratio", "identical"}) header.push_back(h);
  std::vector<std::vector<std::string>> rows;
  for (const auto& g : groups) {
    std::vector<std::string> row = {g.profile,
                                    variant_name(g.variant),
                                    std::to_string(g.replicas),
                                    percent(g.accuracy_mean),
                                    spread_cell(g.accuracy_sd),
                                    churn_cell(g.churn),
                                    l2_cell(g.l2)};
    if (buffers) row.push_back(g.l2_buffers_mean ? short_number(*g.l2_buffers_mean) : "—");
    row.push_back(spread_cell(g.per_class_sd_max));
    row.push_back(g.per_class_sd_ratio ? fixed(*g.per_class_sd_ratio, 2) : "—");
    row.push_back(g.identical ? "yes" : "no");
    rows.push_back(std::move(row));
  }
  d.table(header, rows);

  d.heading("What the numbers are");
  d.paragraph(
      "the fraction of test examples whose predicted labels differ between two replicas, averaged over all "
      "pairs of replicas of the group.",
      "Churn:");
  d.paragraph(
      "the distance between two replicas' final trainable weights after scaling each to unit norm, "
      "‖w1/‖w1‖ − w2/‖w2‖‖, averaged over all pairs (BatchNorm running statistics separately).",
      "L2:");
  d.paragraph(
      "the sample standard deviation (n − 1) over replicas of the test accuracy, and per class of the "
      "accuracy on that class's test examples; the max per-class sd is the largest of these, and its "
      "interval is that largest value recomputed on every resample. Ratio: max per-class sd over accuracy sd. "
      "FPR = FP/(FP+TN) and FNR = FN/(FN+TP), one class against the rest.",
      "Accuracy sd:");
  d.paragraph(interval_text(interval_method(x.replicas)), "Intervals:");

  if (!figures.empty()) d.heading("Figures");
  for (const auto& f : figures) d.figure(f.stem, f.caption);
  if (!figure_note.empty()) d.paragraph(figure_note);

  d.heading("Per class");
  rows.clear();
  for (const auto& g : groups)
    for (size_t c = 0; c < g.class_accuracy_mean.size(); ++c)
      rows.push_back({g.profile, variant_name(g.variant), class_name(class_names, c), percent(g.class_accuracy_mean[c]),
                      spread_cell(g.class_accuracy_sd[c]), percent(g.fpr_sd[c]), percent(g.fnr_sd[c])});
  d.table({"profile", "variant", "class", "accuracy % (mean)", "sd % [95% CI]", "FPR sd %", "FNR sd %"}, rows);

  d.heading("Files");
  d.links({{"summary.json: the table above, the recipe, the interval method, version and command", "summary.json"},
           {"replicas.csv: one row per replica (seeds, accuracy, loss, hashes, seconds)", "replicas.csv"},
           {"per_class.csv: per class accuracy, FPR and FNR means and sds, with intervals", "per_class.csv"},
           {"pairs.csv: churn and L2 of every pair of replicas", "pairs.csv"}});
  d.heading("Provenance");
  d.paragraph(provenance.version + ", " + today() + ".", "fplab version:");
  d.paragraph("", "Command:");
  d.code(provenance.command);
  return d;
}

}  // namespace

nlohmann::json summary_json(const Experiment& x, const std::vector<GroupSummary>& groups,
                            const Provenance& provenance) {
  auto interval = [](double low, double high) { return nlohmann::json::array({low, high}); };
  nlohmann::json results = nlohmann::json::array();
  for (const auto& g : groups) {
    double fnr_sd_max = 0;
    for (double v : g.fnr_sd) fnr_sd_max = std::max(fnr_sd_max, v);
    results.push_back(
        {{"profile", g.profile},
         {"variant", variant_name(g.variant)},
         {"replicas", g.replicas},
         {"accuracy_mean", g.accuracy_mean},
         {"accuracy_std", g.accuracy_sd.sd},
         {"accuracy_std_ci95_replicas", interval(g.accuracy_sd.ci_low, g.accuracy_sd.ci_high)},
         {"churn_mean", g.churn.mean},
         {"churn_ci95_replicas", interval(g.churn.ci_low, g.churn.ci_high)},
         {"l2_mean", g.l2.mean},
         {"l2_ci95_replicas", interval(g.l2.ci_low, g.l2.ci_high)},
         {"l2_buffers_mean", optional_json(g.l2_buffers_mean)},
         {"per_class_std_max", g.per_class_sd_max.sd},
         {"per_class_std_max_ci95_replicas", interval(g.per_class_sd_max.ci_low, g.per_class_sd_max.ci_high)},
         {"per_class_std_ratio", optional_json(g.per_class_sd_ratio)},
         {"fnr_std_max", fnr_sd_max},
         {"identical_replicas", g.identical}});
  }
  const IntervalMethod m = interval_method(x.replicas);
  const nlohmann::json intervals = {
      {"level", ReplicaBootstrap::kLevel},
      {"method", "percentile bootstrap over replicas"},
      {"resampled", "replicas, with replacement; the test examples are fixed (not resampled)"},
      {"same_replica_pairs",
       "left out of churn and L2; a resample that drew a single replica is left out of every interval"},
      {"exact", m.exact},
      {"resamples", m.resamples},
      {"seed", m.exact ? nlohmann::json(nullptr) : nlohmann::json(m.seed)}};
  return {{"experiment", x.name},
          {"description", x.description},
          {"fplab_version", provenance.version},
          {"command", provenance.command},
          {"recipe", recipe_json(x)},
          {"intervals", intervals},
          {"results", results}};
}

std::string accuracy_cell(double mean, double sd) { return percent(mean) + " ± " + percent(sd); }
std::string churn_cell(const PairwiseSummary& c) { return with_interval(c.mean, c.ci_low, c.ci_high); }
// Three significant digits, so that a distance of 1.7e-07 does not print as 0.00000.
std::string short_number(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.3g", v);
  return buffer;
}

std::string summary_table(const std::vector<GroupSummary>& groups) {
  std::ostringstream s;
  char line[256];
  std::snprintf(line, sizeof line, "%-12s %-10s %4s  %-16s %-27s %-9s %-9s %s\n", "profile", "variant", "n",
                "accuracy %", "churn % [95% CI, replicas]", "L2", "class sd", "identical");
  s << line;
  for (const auto& g : groups) {
    const std::string acc = accuracy_cell(g.accuracy_mean, g.accuracy_sd.sd), churn = churn_cell(g.churn);
    std::snprintf(line, sizeof line, "%-12s %-10s %4zu  %-16s %-27s %-9s %-9s %s\n", g.profile.c_str(),
                  variant_name(g.variant).c_str(), g.replicas, acc.c_str(), churn.c_str(),
                  short_number(g.l2.mean).c_str(), percent(g.per_class_sd_max.sd).c_str(), g.identical ? "yes" : "no");
    s << line;
  }
  return s.str();
}

void write_results(const Experiment& x, const std::vector<ReplicaRecord>& records,
                   const std::vector<GroupSummary>& groups, const std::vector<std::string>& class_names,
                   const std::string& out, const Provenance& provenance) {
  using util::write_file_atomically;
  std::filesystem::create_directories(out + "/figures");
  write_file_atomically(out + "/summary.json", summary_json(x, groups, provenance).dump(2) + "\n");

  std::string csv =
      "profile,variant,replica,algo_seed,impl_seed,test_accuracy,train_loss,weights_sha256,predictions_sha256,"
      "seconds\n";
  for (const auto& r : records)
    csv += r.profile + "," + variant_name(r.variant) + "," + std::to_string(r.replica) + "," +
           std::to_string(r.algo_seed) + "," + std::to_string(r.impl_seed) + "," + fixed(r.test_accuracy, 6) + "," +
           fixed(r.train_loss, 6) + "," + r.weights_sha256 + "," + r.predictions_sha256 + "," + fixed(r.seconds, 3) +
           "\n";
  write_file_atomically(out + "/replicas.csv", csv);

  csv =
      "profile,variant,class,class_name,accuracy_mean,accuracy_std,accuracy_std_ci95_replicas_low,"
      "accuracy_std_ci95_replicas_high,fpr_mean,fpr_std,fnr_mean,fnr_std\n";
  for (const auto& g : groups)
    for (size_t c = 0; c < g.class_accuracy_mean.size(); ++c) {
      const auto& sd = g.class_accuracy_sd[c];
      csv += g.profile + "," + variant_name(g.variant) + "," + std::to_string(c) + ",\"" + class_name(class_names, c) +
             "\"," + fixed(g.class_accuracy_mean[c], 6) + "," + fixed(sd.sd, 6) + "," + fixed(sd.ci_low, 6) + "," +
             fixed(sd.ci_high, 6) + "," + fixed(g.fpr_mean[c], 6) + "," + fixed(g.fpr_sd[c], 6) + "," +
             fixed(g.fnr_mean[c], 6) + "," + fixed(g.fnr_sd[c], 6) + "\n";
    }
  write_file_atomically(out + "/per_class.csv", csv);

  csv = "profile,variant,replica_a,replica_b,churn,l2\n";
  for (const auto& g : groups) {
    std::vector<const ReplicaRecord*> group;
    for (const auto& r : records)
      if (r.profile == g.profile && r.variant == g.variant) group.push_back(&r);
    for (size_t i = 0; i < group.size(); ++i)
      for (size_t j = i + 1; j < group.size(); ++j)
        csv += g.profile + "," + variant_name(g.variant) + "," + std::to_string(i) + "," + std::to_string(j) + "," +
               fixed(churn(group[i]->predictions, group[j]->predictions), 6) + "," +
               fixed(normalized_l2(group[i]->weights, group[j]->weights), 8) + "\n";
  }
  write_file_atomically(out + "/pairs.csv", csv);

  std::vector<ReportFigure> figures;
  std::string figure_note;
  if (util::program_on_path("gnuplot"))
    figures = write_figures(groups, class_names, out);
  else
    figure_note = "(figures skipped: gnuplot is not installed; scripts/setup installs gnuplot-nox)";

  const ReportDocument document = report_document(x, groups, class_names, figures, figure_note, provenance);
  write_file_atomically(out + "/report.md", to_markdown(document));
  write_file_atomically(out + "/report.html", to_html(document));
}

}  // namespace fplab::experiments
