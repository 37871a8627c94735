#include "experiments/report_figures.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "util/gnuplot_figure.hpp"

namespace fplab::experiments {
namespace {

std::string number(double v, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, v);
  return buffer;
}

std::string group_label(const GroupSummary& g) { return g.profile + "/" + variant_name(g.variant); }

// 0xrrggbb as the decimal number gnuplot's `lc rgb variable` reads from a column.
std::string colour_number(Variant v) { return std::to_string(std::stoul(variant_colour(v).substr(1), nullptr, 16)); }

// A group's fill: solid for the first profile, a hatch pattern for each further one, so that two
// profiles' bars of the same variant (same colour) stay apart.
std::string profile_fill(const std::vector<GroupSummary>& groups, const std::string& profile) {
  std::vector<std::string> profiles;
  for (const auto& g : groups)
    if (std::find(profiles.begin(), profiles.end(), profile) == profiles.end()) profiles.push_back(g.profile);
  const auto k = static_cast<size_t>(std::find(profiles.begin(), profiles.end(), profile) - profiles.begin());
  return k == 0 ? "fill solid 0.8 border -1" : "fill pattern " + std::to_string(1 + (k - 1) % 7) + " border -1";
}

// The top of the y axis (a fraction): room above the highest interval for the printed values; 1%
// when every value is 0 or rounding noise (1e-16 from a mean of equal accuracies), which would
// print as an empty range [0:0] that gnuplot refuses.
double y_top(double highest) { return highest > 1e-8 ? highest * 1.2 : 0.01; }

// The plot clause of intervals as capped vertical lines, from data columns x, low and high
// (gnuplot's yerrorbars style blanks a white disc around the point it marks at the mean).
std::string interval_clause(int x, int low, int high) {
  return "'data.dat' using " + std::to_string(x) + ":" + std::to_string(low) + ":(0):($" + std::to_string(high) +
         " - $" + std::to_string(low) + ") with vectors heads size screen 0.006,90 lc rgb 'black' lw 1.5 notitle";
}

// A bar's value and interval, as fractions (drawn in percent).
struct Bar {
  double value, low, high;
};

void render_all(const std::string& script, const std::string& data, const std::string& stem, int width, int height) {
  for (const char* ext : {".png", ".svg", ".pdf"}) util::render_gnuplot(stem + ext, script, data, width, height);
}

// One bar per group in its variant's colour, the interval as an error bar, the value printed
// above it, and a marker where the value is zero.
void bar_figure(const std::vector<GroupSummary>& groups, const std::function<Bar(const GroupSummary&)>& bar,
                const std::string& title, const std::string& ylabel, const std::string& stem) {
  std::string data;
  double highest = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const Bar b = bar(groups[i]);
    highest = std::max({highest, b.value, b.high});
    data += std::to_string(i) + " \"" + group_label(groups[i]) + "\" " + number(100 * b.value, 6) + " " +
            number(100 * b.low, 6) + " " + number(100 * b.high, 6) + " " + colour_number(groups[i].variant) + " \"" +
            number(100 * b.value, 2) + "\"\n";
  }
  const std::string script =
      "set title " + util::gnuplot_quoted(title) + "\nset ylabel " + util::gnuplot_quoted(ylabel) +
      "\nset style fill solid 0.8 border -1\nset boxwidth 0.6\nset xtics rotate by 35 right nomirror\nset ytics "
      "nomirror\n"
      "set grid ytics lc rgb '#dddddd'\nset key off\nset rmargin 6\n"
      "set xrange [-0.7:" +
      number(static_cast<double>(groups.size()) - 0.3, 1) + "]\nset yrange [0:" + number(100 * y_top(highest), 6) +
      "]\n"
      "plot 'data.dat' using 1:3:6:xtic(2) with boxes lc rgb variable, " +
      interval_clause(1, 4, 5) +
      ", "
      "'data.dat' using 1:($3 == 0 ? 0 : 1/0):6 with points pt 7 ps 1.6 lc rgb variable, "
      "'' using 1:5:7 with labels center offset 0,0.9\n";
  // 70 pixels a bar at least, so that the value printed above each bar stays clear of the next.
  render_all(script, data, stem, std::max(900, 200 + 70 * static_cast<int>(groups.size())), 520);
}

// Per class, one bar per group (clustered), with the interval and markers for zeros.
void per_class_figure(const std::vector<GroupSummary>& groups, const std::vector<std::string>& class_names,
                      const std::string& stem) {
  const size_t classes = groups.front().class_accuracy_sd.size();
  const double width = 0.8 / static_cast<double>(groups.size());
  std::string data, tics, plots;
  double highest = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t c = 0; c < classes; ++c) {
      const auto& s = groups[g].class_accuracy_sd[c];
      highest = std::max({highest, s.sd, s.ci_high});
      const double x = static_cast<double>(c) - 0.4 + width * (static_cast<double>(g) + 0.5);
      data += number(x, 4) + " " + number(100 * s.sd, 6) + " " + number(100 * s.ci_low, 6) + " " +
              number(100 * s.ci_high, 6) + " " + colour_number(groups[g].variant) + "\n";
    }
    data += "\n\n";  // one data block per group: `index g`
    plots += "'data.dat' index " + std::to_string(g) + " using 1:2 with boxes " +
             profile_fill(groups, groups[g].profile) + " lc rgb '" + variant_colour(groups[g].variant) + "' title " +
             util::gnuplot_quoted(group_label(groups[g])) + ", ";
  }
  for (size_t c = 0; c < classes; ++c)
    tics += (c ? ", " : "") + util::gnuplot_quoted(c < class_names.size() ? class_names[c] : std::to_string(c)) + " " +
            std::to_string(c);
  const std::string script =
      "set title " +
      util::gnuplot_quoted("Per-class accuracy sd over replicas (95% bootstrap interval over replicas)") +
      "\nset ylabel 'sd of class accuracy (%)'\nset boxwidth " + number(width, 4) + "\nset xtics (" + tics +
      ") nomirror\nset ytics nomirror\nset grid ytics lc rgb '#dddddd'\n"
      "set key outside right top\nset xrange [-0.6:" +
      number(static_cast<double>(classes) - 0.4, 1) + "]\nset yrange [0:" + number(100 * y_top(highest), 6) +
      "]\nplot " + plots + interval_clause(1, 3, 4) +
      ", "
      "'data.dat' using 1:($2 == 0 ? 0 : 1/0):5 with points pt 7 ps 1.1 lc rgb variable notitle, "
      "'' using 1:($2 == 0 ? 0 : 1/0):(\"0\") with labels center offset 0,0.8 notitle\n";
  // 18 pixels a bar at least, so that the "0" over a zero bar stays clear of its neighbours'.
  const int bars = static_cast<int>(classes * groups.size());
  render_all(script, data, stem, std::clamp(350 + 18 * bars, 1100, 2600), 520);
}

}  // namespace

std::string variant_colour(Variant v) {
  switch (v) {
    case Variant::algo_impl:
      return "#d62728";
    case Variant::algo:
      return "#ff7f0e";
    case Variant::impl:
      return "#1f77b4";
    case Variant::control:
      return "#2ca02c";
    case Variant::order:
      return "#9467bd";
    case Variant::flip:
      return "#8c564b";
  }
  return "#7f7f7f";
}

std::vector<ReportFigure> write_figures(const std::vector<GroupSummary>& groups,
                                        const std::vector<std::string>& class_names, const std::string& out) {
  if (groups.empty()) return {};
  std::vector<ReportFigure> figures = {
      {"figures/churn", "Prediction churn, mean over replica pairs; error bars: 95% bootstrap interval over replicas"},
      {"figures/accuracy_std",
       "Standard deviation of test accuracy over replicas; error bars: 95% bootstrap interval over replicas"},
      {"figures/per_class_std",
       "Per-class accuracy standard deviation over replicas, by class; error bars: 95% bootstrap interval over "
       "replicas"}};
  bar_figure(
      groups,
      [](const GroupSummary& g) {
        return Bar{g.churn.mean, g.churn.ci_low, g.churn.ci_high};
      },
      "Prediction churn (mean over replica pairs; 95% bootstrap interval over replicas)", "churn (% of test examples)",
      out + "/" + figures[0].stem);
  bar_figure(
      groups,
      [](const GroupSummary& g) {
        return Bar{g.accuracy_sd.sd, g.accuracy_sd.ci_low, g.accuracy_sd.ci_high};
      },
      "Standard deviation of test accuracy over replicas (95% bootstrap interval over replicas)",
      "sd of test accuracy (%)", out + "/" + figures[1].stem);
  per_class_figure(groups, class_names, out + "/" + figures[2].stem);
  return figures;
}

}  // namespace fplab::experiments
