// fplab validate: our CUDA kernels against the CPU emulation, bit for bit (sim/cuda/gpu_validation.hpp).
#include <cstdio>
#include <string>

#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "util/whole_file.hpp"
#include "util/progress.hpp"
#if FPLAB_WITH_CUDA
#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/gpu_validation.hpp"
#endif

namespace fplab::app {
namespace {

struct ValidateArgs {
  int runs = 50;
  std::string out;
  bool json = false, quiet = false;
};

int run_validate(const ValidateArgs& args) {
  if (args.runs < 50 || args.runs > 100000) throw UsageError("--runs must be from 50 to 100000");
#if FPLAB_WITH_CUDA
  std::string why;
  if (!sim::gpu::device_available(&why)) throw UsageError("validate needs a CUDA device: " + why);
  sim::gpu::ValidationOptions options;
  options.runs = args.runs;
  util::Progress progress(!args.quiet);
  size_t rows = 0;
  options.progress = [&progress, &rows] { progress.update("validating: " + std::to_string(++rows) + " rows checked"); };
  const auto report = sim::gpu::validate_kernels(options);
  progress.finish();
  if (!args.out.empty()) util::write_file_atomically(args.out, report.json.dump(1) + "\n");
  if (args.json)
    print_json(report.json);
  else
    std::fputs(sim::gpu::validation_table(report).c_str(), stdout);
  return report.ok ? 0 : 1;
#else
  throw UsageError("validate needs the CUDA kernels: this fplab was built without CUDA (no nvcc at configure time)");
#endif
}

}  // namespace

void add_validate_command(CLI::App& app, Runner& run) {
  auto a = std::make_shared<ValidateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Run our CUDA kernels against the CPU emulation: every kernel x schedule x shape x input, bit for bit");
  cmd->add_option("--runs", a->runs, "runs of each atomic case, whose distinct results are counted (>= 50)")
      ->capture_default_str()
      ->check(whole_number());
  cmd->add_option("--out", a->out, "also write the whole report as JSON to this file (atomically)");
  cmd->add_flag("--json", a->json, "print the JSON report instead of the table");
  cmd->add_flag("--quiet", a->quiet, "no progress on stderr");
  cmd->footer(
      "Needs a CUDA device (sm_90); without one it says so and exits with status 2. Exit status 1: some\n"
      "deterministic schedule's GPU result differed from the emulation.\n"
      "Examples:\n"
      "  fplab validate    # the table: bit-identical %, max ulps, distinct atomic results\n"
      "  fplab validate --out validate.json --runs 100\n"
      "  fplab validate --json --quiet | jq .ok");
  cmd->callback([&run, a] { run = [a] { return run_validate(*a); }; });
}

}  // namespace fplab::app
