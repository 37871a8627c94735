#include "apps/arithmetic_options.hpp"

#include "apps/cli_support.hpp"
#include "fp/number_text.hpp"
#include "fp/round.hpp"
#include "sim/generate.hpp"

namespace fplab::app {

sim::Arithmetic ArithmeticArgs::parse() const {
  sim::Arithmetic a{fp::parse_format(format), fp::parse_mode(mode), flush, saturate, sim::parse_products(products)};
  if (sr_bits != 64 && a.mode != fp::Mode::sr)
    throw UsageError("--sr-bits " + std::to_string(sr_bits) +
                     " needs --mode sr (it is the number of random bits per stochastic rounding)");
  a.sr_bits = sr_bits;
  return a;
}

void add_arithmetic_options(CLI::App* cmd, ArithmeticArgs& a, bool with_products) {
  cmd->add_option("-f,--format", a.format,
                  "accumulation format: fp64 fp32 tf32 bf16 fp16 e4m3 e5m2, an ML format (e2m1fn ...) or eXmY")
      ->capture_default_str();
  cmd->add_option("-m,--mode", a.mode, "rounding of every addition: rne rna rz ru rd ro sr")->capture_default_str();
  if (with_products)
    cmd->add_option("--products", a.products,
                    "how products enter: exact (until the addition that takes them), rounded (to the format first), "
                    "fused (FMA)")
        ->capture_default_str();
  cmd->add_flag("--flush-subnormals", a.flush, "flush subnormal results to zero");
  cmd->add_flag("--saturate", a.saturate, "overflow saturates to the largest finite value");
  cmd->add_option("--sr-bits", a.sr_bits,
                  "with --mode sr: random bits per rounding, 1..64, as hardware SR adds them to the dropped bits")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
}

std::vector<double> DataArgs::load(const fp::Format& format, int& rounded) const {
  if (!file.empty() && !gen.empty()) throw UsageError("give either --file or --gen, not both");
  std::vector<double> terms;
  rounded = 0;
  if (!gen.empty()) {
    for (double x : sim::generate(gen, seed)) {
      const fp::Rounded r = fp::round_double(x, format, {});
      terms.push_back(r.value);
      rounded += r.inexact;
    }
    return terms;
  }
  if (file.empty()) throw UsageError("no data: give --file PATH (one number per line, - for stdin) or --gen DIST:N");
  return load_numbers(file, "--file", format, rounded);
}

std::vector<double> load_numbers(const std::string& file, const std::string& option, const fp::Format& format,
                                 int& rounded) {
  std::vector<double> values;
  rounded = 0;
  for (const auto& text : read_number_texts({}, file, option)) {
    fp::ExactValue exact;
    try {
      exact = fp::parse_number(text);
    } catch (const fp::FormatError& e) {
      throw UsageError(option + " '" + file + "': " + e.what());
    }
    const fp::Rounded r = fp::round_exact(exact, format, {});
    values.push_back(r.value);
    rounded += r.inexact;
  }
  return values;
}

void add_data_options(CLI::App* cmd, DataArgs& d) {
  cmd->add_option("--file", d.file, "data: one number per line (- for stdin)");
  cmd->add_option("--gen", d.gen, "generated data DIST:N, DIST one of normal uniform lognormal cancel ones");
  cmd->add_option("--seed", d.seed, "seed of --gen")->capture_default_str()->check(whole_number());
}

}  // namespace fplab::app
