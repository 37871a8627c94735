// The mean of paired differences with a Student-t confidence interval: each unit one difference
// (an algo seed's emulated churn less a real device's, say), the units the sample. Where the units
// are few (a calibration over 2-6 algo seeds), a percentile bootstrap over them is far too narrow
// (with 3 units it returns their range); the t interval states its assumption instead: the
// differences roughly normal.
#pragma once

#include <cstddef>
#include <span>

namespace fplab::experiments {

struct PairedInterval {
  double mean = 0, low = 0, high = 0;  // the mean difference and the interval's ends
  size_t units = 0;
};

// At least two finite differences and 0 < level < 1; std::invalid_argument (one line) otherwise.
PairedInterval paired_t_interval(std::span<const double> differences, double level = 0.95);

}  // namespace fplab::experiments
