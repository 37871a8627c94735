#include "apps/arithmetic_options.hpp"

#include "apps/cli_support.hpp"
#include "fp/number_text.hpp"
#include "fp/round.hpp"
#include "sim/generate.hpp"

namespace fplab::app {

sim::Arithmetic ArithmeticArgs::parse() const {
  return {fp::parse_format(format), fp::parse_mode(mode), flush, saturate, sim::parse_products(products)};
}

void add_arithmetic_options(CLI::App* cmd, ArithmeticArgs& a) {
  cmd->add_option("-f,--format", a.format, "accumulation format: fp64 fp32 tf32 bf16 fp16 e4m3 e5m2, an ML format (e2m1fn ...) or eXmY")
      ->capture_default_str();
  cmd->add_option("-m,--mode", a.mode, "rounding of every addition: rne rna rz ru rd ro sr")->capture_default_str();
  cmd->add_option("--products", a.products, "products (dot products): exact, rounded, fused (FMA)")
      ->capture_default_str();
  cmd->add_flag("--flush-subnormals", a.flush, "flush subnormal results to zero");
  cmd->add_flag("--saturate", a.saturate, "overflow saturates to the largest finite value");
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
  for (const auto& text : read_number_texts({}, file)) {
    const fp::Rounded r = fp::round_exact(fp::parse_number(text), format, {});
    terms.push_back(r.value);
    rounded += r.inexact;
  }
  return terms;
}

void add_data_options(CLI::App* cmd, DataArgs& d) {
  cmd->add_option("--file", d.file, "data: one number per line (- for stdin)");
  cmd->add_option("--gen", d.gen, "generated data DIST:N, DIST one of normal uniform lognormal cancel ones");
  cmd->add_option("--seed", d.seed, "seed of --gen")->capture_default_str()->check(whole_number());
}

}  // namespace fplab::app
