// Options shared by the commands that evaluate schedules: arithmetic and input data.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "sim/arithmetic.hpp"

namespace fplab::app {

struct ArithmeticArgs {
  std::string format = "fp32";
  std::string mode = "rne";
  std::string products = "fused";
  bool flush = false, saturate = false;
  int sr_bits = 64;
  sim::Arithmetic parse() const;
};
// --products only where there are products (fplab dot): a sum of values has none, and an option
// that cannot change the result would only mislead.
void add_arithmetic_options(CLI::App* cmd, ArithmeticArgs& args, bool with_products = false);

// The numbers of a file (one per line, "-" for stdin), each rounded to nearest in `format` (data
// as it would be stored there); `rounded` counts those that changed. Errors (UsageError) name the
// file by `option`.
std::vector<double> load_numbers(const std::string& file, const std::string& option, const fp::Format& format,
                                 int& rounded);

struct DataArgs {
  std::string file;
  std::string gen;
  uint64_t seed = 1;
  // The terms, each rounded to nearest in `format` (data as it would be stored there);
  // `rounded` counts those that changed.
  std::vector<double> load(const fp::Format& format, int& rounded) const;
};
void add_data_options(CLI::App* cmd, DataArgs& args);

}  // namespace fplab::app
