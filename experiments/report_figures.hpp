// The report's figures, each written as PNG, SVG and PDF through gnuplot: churn and accuracy sd per
// group with their bootstrap intervals over replicas, and the per-class accuracy sd as grouped bars.
// A variant has the same colour in every figure; a zero bar is drawn as a marker with its value,
// since a bar of height zero is otherwise indistinguishable from a missing one.
#pragma once

#include <string>
#include <vector>

#include "experiments/group_summary.hpp"

namespace fplab::experiments {

struct ReportFigure {
  std::string stem;  // relative to the output folder, e.g. "figures/churn"
  std::string caption;
};

// Writes out_dir/figures/*.{png,svg,pdf}; the figures written, in report order. Throws
// util::RenderError when gnuplot fails (callers check that it is installed).
std::vector<ReportFigure> write_figures(const std::vector<GroupSummary>& groups,
                                        const std::vector<std::string>& class_names, const std::string& out_dir);

// "#rrggbb" of a variant, the same in every figure.
std::string variant_colour(Variant variant);

}  // namespace fplab::experiments
