// fplab round: one number, rounded to a format, with its neighbours and the error.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>

#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "fp/number_text.hpp"
#include "fp/round.hpp"

namespace fplab::app {
namespace {

struct RoundArgs {
  std::vector<std::string> values;
  std::string format = "fp32";
  std::string mode = "rne";
  bool flush = false, saturate = false, saturate_infinities = false, json = false;
  uint64_t seed = 1;
  int sr_bits = 64;
  std::optional<uint64_t> random_bits;
};

int run_round(const RoundArgs& args) {
  const fp::Format format = fp::parse_format(args.format);
  std::vector<fp::Mode> modes;
  if (args.mode == "all")
    modes.assign(fp::all_modes.begin(), fp::all_modes.end());
  else
    modes.push_back(fp::parse_mode(args.mode));
  const bool stochastic = std::find(modes.begin(), modes.end(), fp::Mode::sr) != modes.end();
  if (!stochastic && (args.sr_bits != 64 || args.random_bits))
    throw UsageError(std::string(args.random_bits ? "--random-bits" : "--sr-bits") + " needs --mode sr or all");
  if (args.random_bits && args.sr_bits < 64 && *args.random_bits >> args.sr_bits)
    throw UsageError("--random-bits " + std::to_string(*args.random_bits) + " does not fit in --sr-bits " +
                     std::to_string(args.sr_bits) + " bits");
  fp::CounterRng stream(args.seed);
  fp::RoundingOptions options{fp::Mode::rne, args.flush, args.saturate, &stream};
  options.saturate_infinities = args.saturate_infinities;
  options.sr_bits = args.sr_bits;
  options.sr_random = args.random_bits;

  nlohmann::json results = nlohmann::json::array();
  for (const std::string& text : args.values) {
    const fp::ExactValue exact = fp::parse_number(text);
    // Neighbours on the format's grid, without flushing or saturation.
    const fp::Rounded below = fp::round_exact(exact, format, {fp::Mode::rd});
    const fp::Rounded above = fp::round_exact(exact, format, {fp::Mode::ru});
    const double approx = fp::parse_double(text);
    // "no value of F lies below (or above) it; the nearest above (below) is N (bits)"
    auto nothing_beyond = [&](bool nothing_below, const fp::Rounded& nearest) {
      std::printf("  no value of %s lies %s it; the nearest %s is %s (%s)\n", format.name.c_str(),
                  nothing_below ? "below" : "above", nothing_below ? "above" : "below",
                  fp::format_double(nearest.value).c_str(), bits_hex(nearest.bits, format.width()).c_str());
    };
    if (!args.json) {
      std::printf("%s in %s (%d exponent bits, %d fraction bits)\n", text.c_str(), format.name.c_str(), format.exp_bits,
                  format.man_bits);
      // Not just equal neighbours: a format that saturates (MX FP4) has max on both sides of 7.
      if (below.bits == above.bits && !below.inexact)
        std::printf("  exactly representable: %s  bits %s\n", fp::format_double(below.value).c_str(),
                    bits_hex(below.bits, format.width()).c_str());
      else if (std::isnan(below.value) && std::isnan(above.value)) {
        // Neither neighbour: past an e4m3's 448 (no infinities: say where it ends) or e8m0's
        // missing zero and negatives.
        const fp::Rounded end = fp::round_double(std::copysign(format.max_finite(), approx), format, {});
        if (std::isinf(approx) && !std::isnan(end.value))
          std::printf("  %s has no infinities; its finite values end at %s (%s)\n", format.name.c_str(),
                      fp::format_double(end.value).c_str(), bits_hex(end.bits, format.width()).c_str());
        else
          std::printf("  no value of %s lies on either side of it\n", format.name.c_str());
      } else if (std::isnan(below.value) || std::isnan(above.value))
        nothing_beyond(std::isnan(below.value), std::isnan(below.value) ? above : below);
      else if (below.bits == above.bits)  // past the largest of a format without infinities (MX FP4: 7)
        nothing_beyond(std::signbit(below.value), below);
      else
        std::printf("  lies between %s (%s) and %s (%s)\n", fp::format_double(below.value).c_str(),
                    bits_hex(below.bits, format.width()).c_str(), fp::format_double(above.value).c_str(),
                    bits_hex(above.bits, format.width()).c_str());
    }
    for (fp::Mode mode : modes) {
      options.mode = mode;
      const fp::Rounded r = fp::round_exact(exact, format, options);
      const double error = fp::difference_from_text(r.value, text);
      const double ulp = std::isfinite(approx) ? format.ulp(std::min(std::fabs(approx), format.max_finite())) : NAN;
      const double ulps = error / ulp;
      const double relative = approx != 0 ? error / std::fabs(approx) : NAN;
      if (args.json) {
        results.push_back({{"input", text},
                           {"format", format.name},
                           {"mode", fp::mode_name(mode)},
                           {"value", json_number(r.value)},
                           {"value_text", fp::format_double(r.value)},
                           {"hex", fp::format_hex(r.value)},
                           {"bits", bits_hex(r.bits, format.width())},
                           {"below", json_number(below.value)},
                           {"below_bits", bits_hex(below.bits, format.width())},
                           {"above", json_number(above.value)},
                           {"above_bits", bits_hex(above.bits, format.width())},
                           {"error", json_number(error)},
                           {"ulps", json_number(ulps)},
                           {"relative_error", json_number(relative)},
                           {"inexact", r.inexact},
                           {"overflow", r.overflow},
                           {"underflow", r.underflow}});
      } else {
        char error_text[96] = "no finite error";
        if (std::isfinite(error))
          std::snprintf(error_text, sizeof error_text, "error %+.6g (%+.4f ulp, relative %.3g)", error, ulps,
                        std::fabs(relative));
        std::printf("  %-3s -> %-24s bits %s  %s%s%s\n", std::string(fp::mode_name(mode)).c_str(),
                    fp::format_double(r.value).c_str(), bits_hex(r.bits, format.width()).c_str(), error_text,
                    r.overflow ? "  overflow" : "", r.underflow ? "  underflow" : "");
      }
    }
  }
  if (args.json) print_json({{"results", results}});
  return 0;
}

}  // namespace

void add_round_command(CLI::App& app, Runner& run) {
  auto args = std::make_shared<RoundArgs>();
  CLI::App* cmd = app.add_subcommand("round", "Round numbers to a format: value, bit pattern, neighbours, error");
  cmd->add_option("values", args->values, "numbers: decimal (0.1, 1e-3), hex-float (0x1.8p3), inf, nan")->required();
  cmd->add_option("-f,--format", args->format,
                  "fp64 fp32 tf32 bf16 fp16 e4m3 e5m2, ML formats (e4m3fnuz e2m1fn e8m0 ...: "
                  "docs/formats-and-rounding.md), or eXmY")
      ->capture_default_str();
  cmd->add_option("-m,--mode", args->mode, "rne rna rz ru rd ro sr, or all")->capture_default_str();
  cmd->add_flag("--flush-subnormals", args->flush, "results below the smallest normal become zero");
  cmd->add_flag("--saturate", args->saturate, "overflow gives the largest finite value instead of inf/NaN");
  cmd->add_flag("--saturate-infinities", args->saturate_infinities,
                "--saturate, and +-inf gives +-max too (OCP MX SAT, PTX cvt .satfinite)");
  cmd->add_option("--sr-bits", args->sr_bits,
                  "sr: random bits per rounding, 1..64; they are added to the dropped bits, truncated to as many, "
                  "and a carry rounds up")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--random-bits", args->random_bits,
                  "sr: these random bits (decimal or 0x hex, below 2^sr-bits) instead of a draw from --seed's stream, "
                  "as an instruction's rbits operand");
  cmd->add_option("--seed", args->seed, "seed of the stochastic-rounding stream")
      ->capture_default_str()
      ->check(whole_number());
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->footer(
      "Examples:\n"
      "  fplab round 0.1 --format bf16 --mode all\n"
      "  fplab round 500 --format e4m3 --saturate\n"
      "  fplab round inf --format e5m2 --saturate-infinities\n"
      "  fplab round 1.3 --format e2m1fn --mode sr --sr-bits 4 --random-bits 0xa\n"
      "  fplab round 7 0.3 --format e2m1fn --mode all\n"
      "  fplab round 1e-8 --format fp16 --flush-subnormals --json");
  cmd->callback([&run, args] { run = [args] { return run_round(*args); }; });
}

}  // namespace fplab::app
