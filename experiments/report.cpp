#include "experiments/report.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <sstream>

#include "models/checkpoint_io.hpp"
#include "util/external_program.hpp"
#include "util/gnuplot_figure.hpp"

namespace fplab::experiments {
namespace {

nlohmann::json optional_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

std::string fixed(double v, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, v);
  return buffer;
}
std::string percent(double v, int digits = 2) { return fixed(100 * v, digits); }

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d", std::gmtime(&now));
  return buffer;
}

bool have_gnuplot() { return util::program_on_path("gnuplot"); }

// Renders a gnuplot script (reading its data as 'data.dat') to PNG and SVG beside each other.
void plot(const std::string& script, const std::string& data, const std::string& stem) {
  for (const char* ext : {".png", ".svg"}) util::render_gnuplot(stem + ext, script, data);
}

}  // namespace

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
      g.accuracy_mean = mean(accuracy);
      g.accuracy_std = stddev(accuracy);
      g.churn = churn_summary(predictions);
      g.l2_mean = mean_pairwise_l2(weights);
      if (!buffers.empty()) g.l2_buffers_mean = mean_pairwise_l2(buffers);
      for (size_t c = 0; c < classes; ++c) {
        g.class_accuracy_mean.push_back(mean(class_acc[c]));
        g.class_accuracy_std.push_back(stddev(class_acc[c]));
        g.fpr_mean.push_back(mean(fpr[c]));
        g.fpr_std.push_back(stddev(fpr[c]));
        g.fnr_mean.push_back(mean(fnr[c]));
        g.fnr_std.push_back(stddev(fnr[c]));
        g.per_class_std_max = std::max(g.per_class_std_max, g.class_accuracy_std.back());
      }
      if (g.accuracy_std > 0) g.per_class_std_ratio = g.per_class_std_max / g.accuracy_std;
      out.push_back(std::move(g));
    }
  return out;
}

nlohmann::json summary_json(const Experiment& x, const std::vector<GroupSummary>& groups) {
  nlohmann::json results = nlohmann::json::array();
  for (const auto& g : groups)
    results.push_back({{"profile", g.profile},
                       {"variant", variant_name(g.variant)},
                       {"replicas", g.replicas},
                       {"accuracy_mean", g.accuracy_mean},
                       {"accuracy_std", g.accuracy_std},
                       {"churn_mean", g.churn.mean},
                       {"churn_ci95", {g.churn.ci_low, g.churn.ci_high}},
                       {"l2_mean", g.l2_mean},
                       {"l2_buffers_mean", optional_json(g.l2_buffers_mean)},
                       {"per_class_std_max", g.per_class_std_max},
                       {"per_class_std_ratio", optional_json(g.per_class_std_ratio)},
                       {"fnr_std_max", *std::max_element(g.fnr_std.begin(), g.fnr_std.end())},
                       {"identical_replicas", g.identical}});
  return {{"experiment", x.name}, {"description", x.description}, {"results", results}};
}

std::string accuracy_cell(double mean, double sd) { return percent(mean) + " ± " + percent(sd); }
std::string churn_cell(const ChurnSummary& c) {
  return percent(c.mean) + " [" + percent(c.ci_low) + ", " + percent(c.ci_high) + "]";
}
// Three significant digits, so that a distance of 1.7e-07 does not print as 0.00000.
std::string short_number(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.3g", v);
  return buffer;
}

std::string summary_table(const std::vector<GroupSummary>& groups) {
  std::ostringstream s;
  char line[256];
  std::snprintf(line, sizeof line, "%-12s %-10s %4s  %-16s %-24s %-9s %-9s %s\n", "profile", "variant", "n",
                "accuracy %", "churn % [95% CI]", "L2", "class sd", "identical");
  s << line;
  for (const auto& g : groups) {
    const std::string acc = accuracy_cell(g.accuracy_mean, g.accuracy_std), churn = churn_cell(g.churn);
    std::snprintf(line, sizeof line, "%-12s %-10s %4zu  %-16s %-24s %-9s %-9s %s\n", g.profile.c_str(),
                  variant_name(g.variant).c_str(), g.replicas, acc.c_str(), churn.c_str(), short_number(g.l2_mean).c_str(),
                  percent(g.per_class_std_max).c_str(), g.identical ? "yes" : "no");
    s << line;
  }
  return s.str();
}

void write_results(const Experiment& x, const std::vector<ReplicaRecord>& records, const std::vector<GroupSummary>& groups,
                   const std::vector<std::string>& class_names, const std::string& out, const std::string& command) {
  using models::write_file_atomically;
  std::filesystem::create_directories(out + "/figures");
  write_file_atomically(out + "/summary.json", summary_json(x, groups).dump(2) + "\n");

  std::string csv = "profile,variant,replica,algo_seed,impl_seed,test_accuracy,train_loss,weights_sha256,predictions_sha256,seconds\n";
  for (const auto& r : records)
    csv += r.profile + "," + variant_name(r.variant) + "," + std::to_string(r.replica) + "," + std::to_string(r.algo_seed) +
           "," + std::to_string(r.impl_seed) + "," + fixed(r.test_accuracy, 6) + "," + fixed(r.train_loss, 6) + "," +
           r.weights_sha256 + "," + r.predictions_sha256 + "," + fixed(r.seconds, 3) + "\n";
  write_file_atomically(out + "/replicas.csv", csv);

  csv = "profile,variant,class,class_name,accuracy_mean,accuracy_std,fpr_mean,fpr_std,fnr_mean,fnr_std\n";
  for (const auto& g : groups)
    for (size_t c = 0; c < g.class_accuracy_mean.size(); ++c)
      csv += g.profile + "," + variant_name(g.variant) + "," + std::to_string(c) + ",\"" +
             (c < class_names.size() ? class_names[c] : std::to_string(c)) + "\"," + fixed(g.class_accuracy_mean[c], 6) +
             "," + fixed(g.class_accuracy_std[c], 6) + "," + fixed(g.fpr_mean[c], 6) + "," + fixed(g.fpr_std[c], 6) + "," +
             fixed(g.fnr_mean[c], 6) + "," + fixed(g.fnr_std[c], 6) + "\n";
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

  // Figures: churn and accuracy spread by variant, and per-class accuracy spread.
  std::vector<std::string> figures;
  std::string figure_note;
  if (have_gnuplot()) {
    std::string data;
    for (size_t i = 0; i < groups.size(); ++i)
      data += std::to_string(i) + " \"" + groups[i].profile + "/" + variant_name(groups[i].variant) + "\" " +
              fixed(100 * groups[i].churn.mean, 5) + " " + fixed(100 * groups[i].churn.ci_low, 5) + " " +
              fixed(100 * groups[i].churn.ci_high, 5) + " " + fixed(100 * groups[i].accuracy_std, 5) + "\n";
    plot("set title 'Prediction churn by noise variant (95% bootstrap interval)'\n"
         "set ylabel 'churn (% of test examples)'\nset style fill solid 0.6\nset boxwidth 0.6\nset xtics rotate by -30\nset rmargin 12\n"
         "set yrange [0:*]\nset key off\nplot 'data.dat' using 1:3:xtic(2) with boxes, '' using 1:3:4:5 with yerrorbars lc rgb 'black' pt 0\n",
         data, out + "/figures/churn");
    plot("set title 'Standard deviation of test accuracy over replicas'\n"
         "set ylabel 'stddev of accuracy (%)'\nset style fill solid 0.6\nset boxwidth 0.6\nset xtics rotate by -30\nset rmargin 12\n"
         "set yrange [0:*]\nset key off\nplot 'data.dat' using 1:6:xtic(2) with boxes lc rgb '#3b7dd8'\n",
         data, out + "/figures/accuracy_std");
    std::string classes;
    for (size_t c = 0; c < groups.front().class_accuracy_std.size(); ++c) {
      classes += std::to_string(c);
      for (const auto& g : groups) classes += " " + fixed(100 * g.class_accuracy_std[c], 5);
      classes += "\n";
    }
    std::string lines = "plot ";
    for (size_t i = 0; i < groups.size(); ++i)
      lines += std::string(i ? ", " : "") + "'data.dat' using 1:" + std::to_string(i + 2) + " with linespoints title '" +
               groups[i].profile + "/" + variant_name(groups[i].variant) + "'";
    plot("set title 'Per-class stddev of accuracy over replicas'\n"
         "set xlabel 'class'\nset ylabel 'stddev of class accuracy (%)'\nset xtics 1\nset key outside right\nset yrange [0:*]\n" +
             lines + "\n",
         classes, out + "/figures/per_class_std");
    figures = {"churn", "accuracy_std", "per_class_std"};
  } else {
    figure_note = "(figures skipped: gnuplot is not installed; scripts/setup installs gnuplot-nox)";
  }

  // report.md and report.html.
  std::ostringstream md;
  md << "# " << x.name << "\n\n" << x.description << "\n\n";
  if (!x.paper.empty()) md << "**What the research found:** " << x.paper << "\n\n";
  const auto& c = x.recipe;
  md << "Recipe: `" << c.model.name << "`, " << c.epochs << " epoch(s), batch " << c.batch << ", " << c.optimizer.kind
     << " lr " << c.optimizer.lr << ", training subset " << (c.selection.subset ? std::to_string(c.selection.subset) : "all")
     << "; " << x.replicas << " replicas per variant; accumulation " << x.format << ".\n\n";
  md << "| profile | variant | replicas | accuracy % (mean ± sd) | churn % [95% CI] | L2 | max per-class sd % | ratio | identical |\n";
  md << "|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& g : groups)
    md << "| " << g.profile << " | " << variant_name(g.variant) << " | " << g.replicas << " | "
       << accuracy_cell(g.accuracy_mean, g.accuracy_std) << " | " << churn_cell(g.churn) << " | " << short_number(g.l2_mean) << " | " << percent(g.per_class_std_max) << " | "
       << (g.per_class_std_ratio ? fixed(*g.per_class_std_ratio, 2) : "—") << " | " << (g.identical ? "yes" : "no") << " |\n";
  md << "\nChurn: fraction of test examples whose predicted label differs between two replicas, mean over pairs. "
        "L2: distance between the replicas' final weights after scaling each to unit norm, mean over pairs. "
        "Ratio: the largest per-class accuracy sd over the overall accuracy sd.\n\n";
  for (const auto& f : figures) md << "![" << f << "](figures/" << f << ".png)\n\n";
  if (!figure_note.empty()) md << figure_note << "\n\n";
  md << "## Per class\n\n| profile | variant | class | accuracy % | sd | FPR sd | FNR sd |\n|---|---|---|---|---|---|---|\n";
  for (const auto& g : groups)
    for (size_t k = 0; k < g.class_accuracy_mean.size(); ++k)
      md << "| " << g.profile << " | " << variant_name(g.variant) << " | " << (k < class_names.size() ? class_names[k] : std::to_string(k))
         << " | " << percent(g.class_accuracy_mean[k]) << " | " << percent(g.class_accuracy_std[k]) << " | "
         << percent(g.fpr_std[k]) << " | " << percent(g.fnr_std[k]) << " |\n";
  md << "\nMade on " << today() << " by `" << command << "`; files: summary.json, replicas.csv, per_class.csv, pairs.csv.\n";
  write_file_atomically(out + "/report.md", md.str());

  std::ostringstream html;
  html << "<!doctype html><html><head><meta charset='utf-8'><title>" << x.name
       << "</title><style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}</style></head><body>\n<h1>"
       << x.name << "</h1><p>" << x.description << "</p>\n";
  if (!x.paper.empty()) html << "<p><b>What the research found:</b> " << x.paper << "</p>\n";
  html << "<table><tr><th>profile</th><th>variant</th><th>n</th><th>accuracy %</th><th>sd</th><th>churn %</th><th>95% CI</th>"
          "<th>L2</th><th>max class sd %</th><th>identical</th></tr>\n";
  for (const auto& g : groups)
    html << "<tr><td>" << g.profile << "</td><td>" << variant_name(g.variant) << "</td><td>" << g.replicas << "</td><td>"
         << percent(g.accuracy_mean) << "</td><td>" << percent(g.accuracy_std) << "</td><td>" << percent(g.churn.mean)
         << "</td><td>" << percent(g.churn.ci_low) << " – " << percent(g.churn.ci_high) << "</td><td>" << short_number(g.l2_mean)
         << "</td><td>" << percent(g.per_class_std_max) << "</td><td>" << (g.identical ? "yes" : "no") << "</td></tr>\n";
  html << "</table>\n";
  for (const auto& f : figures) html << "<p><img src='figures/" << f << ".svg' alt='" << f << "'></p>\n";
  if (!figure_note.empty()) html << "<p>" << figure_note << "</p>\n";
  html << "<p>Made on " << today() << " by <code>" << command << "</code>.</p></body></html>\n";
  write_file_atomically(out + "/report.html", html.str());
}

}  // namespace fplab::experiments
