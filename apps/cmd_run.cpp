// fplab run: an experiment (TOML) of variants x replicas x profiles, with metrics and a report.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "fp/format.hpp"

#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "apps/device_option.hpp"
#include "experiments/output_folder.hpp"
#include "experiments/report.hpp"
#include "experiments/runner.hpp"
#ifdef FPLAB_WITH_MPI
#include "experiments/mpi_exchange.hpp"
#endif
#include "profiles/hw_profile.hpp"
#include "util/file_name.hpp"
#include "util/version.hpp"

namespace fplab::app {
namespace {

struct RunArgs {
  std::string file, out, data_dir = models::kFashionMnistDir, device = "cpu";
  std::vector<std::string> profiles_dir;
  size_t jobs = 0;
  bool resume = false, force = false, json = false, quiet = false;
  std::string command;  // the command line as typed, recorded with the results
};

// Every op of a table in `format` ("exact": every reduction exact, in fp32).
profiles::OpTable in_format(profiles::OpTable table, const std::string& format) {
  if (format.empty()) return table;
  if (format == "exact") return profiles::op_table_preset("exact");
  table.set_format(fp::parse_format(format));
  return table;
}

// The ranks of an mpirun launch, or null for a plain run.
std::unique_ptr<experiments::ReplicaExchange> launcher_exchange() {
  if (!experiments::under_mpi_launcher()) return nullptr;
#ifdef FPLAB_WITH_MPI
  return std::make_unique<experiments::MpiExchange>();
#else
  throw UsageError(
      "this fplab was built without MPI, so it cannot run under mpirun (install libopenmpi-dev, "
      "then build again: scripts/setup)");
#endif
}

// The run on this rank (exchange: the ranks of an mpirun launch, or null).
int run_ranks(const RunArgs& args, experiments::ReplicaExchange* exchange) {
  const int rank = exchange ? exchange->rank() : 0, ranks = exchange ? exchange->ranks() : 1;
  // Everything up to the claimed output folder may fail on one rank alone (a folder of other
  // results on rank 0's machine, a data set missing on another): the ranks agree before training,
  // so that none waits for a rank that has stopped.
  std::optional<experiments::Experiment> loaded;
  std::optional<models::Dataset> loaded_data;
  std::optional<experiments::OutputFolder> folder;
  experiments::RunOptions options;
  std::exception_ptr setup_error;
  std::string format;
  bool on_gpu = false;
  try {
    loaded = experiments::load_experiment(args.file);
    const auto& experiment = *loaded;
    options.out_dir = args.out.empty() ? "results/" + util::safe_file_stem(experiment.name) : args.out;
    const size_t replicas = experiment.profiles.size() * experiment.variants.size() * experiment.replicas;
    options.jobs =
        std::min<size_t>(args.jobs ? args.jobs : std::max(1u, std::thread::hardware_concurrency()), replicas);
    options.resume = args.resume;
    options.quiet = args.quiet || args.json;
    options.exchange = exchange;
    format = experiment.format == "fp32" ? "" : experiment.format;
    // --device: every op table the experiment's variants use must run on the GPU (cuda), or the
    // run falls back to the CPU (auto). One replica at a time on a rank's GPU.
    std::vector<profiles::OpTable> tables;
    for (const auto& p : experiment.profiles) {
      const auto profile = profiles::find_hw_profile(p, args.profiles_dir);  // fail early
      for (const auto v : experiment.variants)
        tables.push_back(experiment
                             .replica_config(in_format(profile.default_ops, format),
                                             in_format(profile.deterministic_ops, format), v, 0)
                             .ops);
    }
    on_gpu = device_is_gpu(args.device, tables, !options.quiet);
    loaded_data = models::load_image_dataset(args.data_dir);
    if (const int c = experiment.recipe.selection.imbalance_class;
        c >= static_cast<int>(loaded_data->class_names.size()))
      throw UsageError(experiment.path + ": key 'data.imbalance_class': class " + std::to_string(c) +
                       " does not exist (the data set has classes 0 to " +
                       std::to_string(loaded_data->class_names.size() - 1) + ")");
    folder.emplace(options.out_dir, experiment.name, experiments::ClaimOptions{args.resume, args.force, rank, ranks});
  } catch (...) {
    setup_error = std::current_exception();
  }
  if (exchange) {
    const int failed = exchange->first_failed(setup_error != nullptr);
    if (!setup_error && failed >= 0)
      throw std::runtime_error("rank " + std::to_string(failed) + " stopped before training (its error is above)");
  }
  if (setup_error) std::rethrow_exception(setup_error);
  if (exchange) {
    // --device auto decides per machine: every rank must train on the same kind of device (a
    // replica's fingerprint names it, and rank 0 checks every replica against its own).
    const bool some_cpu = exchange->first_failed(!on_gpu) >= 0, some_gpu = exchange->first_failed(on_gpu) >= 0;
    if (some_cpu && some_gpu)
      throw UsageError("--device " + args.device +
                       ": some ranks found a usable GPU and others did not; run every rank on the same kind of "
                       "device (--device cpu, or cuda)");
  }
  const auto& experiment = *loaded;
  const auto& data = *loaded_data;
  auto resolve = [&](const std::string& name) {
    const auto profile = profiles::find_hw_profile(name, args.profiles_dir);
    return std::pair{in_format(profile.default_ops, format), in_format(profile.deterministic_ops, format)};
  };
  if (on_gpu) {
    const int gpu = gpu_of_rank(rank);
    options.backend = [gpu](const profiles::OpTable& ops) {
      use_gpu(gpu);  // the training thread's device
      return gpu_backend(ops);
    };
    options.jobs = 1;
    options.replica_source = "device=cuda";
  }
  if (!options.quiet && folder->leftovers_removed())
    std::fprintf(stderr, "removed %zu temporary file(s) an interrupted run left in %s\n", folder->leftovers_removed(),
                 options.out_dir.c_str());
  if (!options.quiet)
    std::fprintf(stderr, "%s: %zu profile(s) x %zu variant(s) x %zu replicas on %s%s -> %s\n", experiment.name.c_str(),
                 experiment.profiles.size(), experiment.variants.size(), experiment.replicas,
                 options.backend ? ("GPU " + std::to_string(gpu_of_rank(rank))).c_str()
                                 : (std::to_string(options.jobs) + " thread(s)").c_str(),
                 ranks > 1 ? (", rank " + std::to_string(rank) + " of " + std::to_string(ranks)).c_str() : "",
                 options.out_dir.c_str());
  const auto records = experiments::run_experiment(experiment, data, resolve, options);
  if (rank != 0) return 0;  // rank 0 writes the one report
  const auto groups = experiments::summarize(experiment, records, data.test.labels, data.class_names.size());
  const experiments::Provenance provenance{args.command, util::version()};
  experiments::write_results(experiment, records, groups, data.class_names, options.out_dir, provenance);
  if (args.json)
    print_json(experiments::summary_json(experiment, groups, provenance));
  else
    std::printf("%s\nresults in %s/ (report.md, report.html, summary.json, *.csv, figures/)\n",
                experiments::summary_table(groups).c_str(), options.out_dir.c_str());
  return 0;
}

int run_run(const RunArgs& args) {
  const auto exchange = launcher_exchange();
  if (!exchange) return run_ranks(args, nullptr);
  try {
    return run_ranks(args, exchange.get());
  } catch (const std::exception& e) {
    // Said here, before MPI_Finalize (the exchange's end), where every rank waits for the others:
    // mpirun ends all ranks as soon as one has exited non-zero, which could cut off a line a rank
    // printed only after it ("rank 1 stopped before training", the reason on another rank).
    std::cerr << "fplab: error: " << one_line(e.what()) << '\n' << std::flush;
    return 2;
  }
}

}  // namespace

void add_run_command(CLI::App& app, Runner& run, int argc, char** argv) {
  auto a = std::make_shared<RunArgs>();
  a->command = shell_command_line(argc, argv);
  CLI::App* cmd = app.add_subcommand("run", "Run an experiment: noise variants x replicas x hardware profiles");
  cmd->add_option("file", a->file, "experiment TOML (see experiments/ and docs/experiments.md)")->required();
  cmd->add_option("--out", a->out, "output folder (default results/NAME)");
  cmd->add_option("--jobs", a->jobs, "replicas trained at once (default: all cores; 1 with --device cuda)")
      ->check(whole_number());
  cmd->add_option("--device", a->device,
                  "cpu, cuda (every reduction in fplab's CUDA kernels; under mpirun a rank per GPU of its machine) "
                  "or auto (cuda where it can run the experiment's schedules, else cpu)")
      ->capture_default_str();
  cmd->add_flag("--resume", a->resume, "keep the replicas an earlier (killed) run of this experiment finished");
  cmd->add_flag("--force", a->force, "write into --out even if it holds other results (they are not deleted)");
  cmd->add_option(
         "--data-dir", a->data_dir,
         "folder of an IDX image data set: train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
         "t10k-labels-idx1-ubyte (each .gz or not), classes.txt optional (docs/data.md)")
      ->capture_default_str();
  add_profiles_dir_option(cmd, a->profiles_dir);
  cmd->add_flag("--quiet", a->quiet, "no progress on stderr");
  cmd->add_flag("--json", a->json, "print summary.json");
  cmd->footer(
      "Examples:\n"
      "  fplab run experiments/quick.toml\n"
      "  fplab run experiments/noise_sources_mlp.toml --jobs 2 --out results/fig2\n"
      "  fplab run experiments/hardware.toml --resume    # continue a killed run\n"
      "  mpirun -n 4 fplab run experiments/noise_sources_mlp.toml    # replicas split over ranks (MPI)\n"
      "  fplab run experiments/quick.toml --device auto --out results/quick-gpu    # on a GPU where there is one\n"
      "  mpirun -n 2 fplab run experiments/quick.toml --device cuda    # two GPUs, a rank each");
  cmd->callback([&run, a] { run = [a] { return run_run(*a); }; });
}

}  // namespace fplab::app
