#include "apps/torch_churn.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "apps/cli_support.hpp"
#include "util/whole_file.hpp"

namespace fplab::app {
namespace {

struct Args {
  std::string file, device = "cuda", variant = "impl", tf32 = "off", data_dir = models::kFashionMnistDir, json;
  std::vector<std::string> modes{"default", "deterministic"};
  size_t replicas = 0;
  int threads = 1;
  bool quiet = false;
};

nlohmann::json group_json(const experiments::TwinGroup& g) {
  nlohmann::json replicas = nlohmann::json::array();
  for (const auto& r : g.replicas)
    replicas.push_back({{"algo_seed", r.algo_seed},
                        {"test_accuracy", r.test_accuracy},
                        {"seconds", r.seconds},
                        {"weights_sha256", r.weights_sha256},
                        {"predictions_sha256", r.predictions_sha256}});
  return {
      {"mode", g.mode},
      {"variant", experiments::variant_name(g.variant)},
      {"backend", g.backend},
      {"accuracy_mean", g.accuracy_mean},
      {"accuracy_sd", g.accuracy_sd},
      {"churn",
       {{"mean", g.churn.mean}, {"ci_low", g.churn.ci_low}, {"ci_high", g.churn.ci_high}, {"pairs", g.churn.pairs}}},
      {"l2", g.l2},
      {"identical", g.identical},
      {"replicas", replicas}};
}

int run(const Args& args, const std::string& command, const experiments::TwinTrainer& train,
        const CudaCheck& cuda_available) {
  const experiments::Experiment experiment = experiments::load_experiment(args.file);
  const experiments::Variant variant = experiments::parse_variant(args.variant);
  const size_t replicas = args.replicas ? args.replicas : experiment.replicas;
  models::torch_twin::TwinOptions options;
  options.device = args.device == "cuda" ? models::torch_twin::Device::cuda : models::torch_twin::Device::cpu;
  options.threads = args.threads;
  options.tf32_cublas = args.tf32 == "all";
  options.tf32_cudnn = args.tf32 != "off";
  const bool cuda = options.device == models::torch_twin::Device::cuda;
  if (!cuda && args.tf32 != "off") throw UsageError("--tf32 " + args.tf32 + ": TF32 is a GPU setting (--device cuda)");
  if (!args.json.empty()) {  // found out now, not after the training
    const std::filesystem::path parent = std::filesystem::absolute(args.json).parent_path();
    if (!std::filesystem::is_directory(parent))
      throw UsageError("--json " + args.json + ": no folder " + parent.string());
  }
  // Deterministic cuBLAS needs its workspace setting before the process's first GEMM, so it is
  // set now, for every group of this run (unless the environment already has one).
  if (cuda && std::find(args.modes.begin(), args.modes.end(), "deterministic") != args.modes.end())
    setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
  std::string why;
  if (cuda && !cuda_available(&why)) throw UsageError(why + "; --device cpu runs LibTorch's CPU kernels");
  const auto data = models::load_image_dataset(args.data_dir);
  std::vector<experiments::TwinGroup> groups;
  for (const auto& mode : args.modes) {
    options.deterministic = mode == "deterministic";
    if (!args.quiet)
      std::fprintf(stderr, "%s: %s mode, %zu replica(s) of the %s variant on %s\n", experiment.name.c_str(),
                   mode.c_str(), replicas, experiments::variant_name(variant).c_str(), args.device.c_str());
    auto progress = [&](size_t i, const experiments::TwinReplica& r) {
      if (!args.quiet)
        std::fprintf(stderr, "  [%s %zu/%zu] %.1f s, test accuracy %.4f, weights %.12s\n", mode.c_str(), i + 1,
                     replicas, r.seconds, r.test_accuracy, r.weights_sha256.c_str());
    };
    groups.push_back(experiments::run_twin_group(experiment, data, variant, replicas, options, train, progress));
  }
  std::string backends;
  for (const auto& g : groups) backends += g.mode + ": " + g.backend + "\n";
  std::printf("%s (%s)\n%s\n%s", experiment.name.c_str(), args.file.c_str(), backends.c_str(),
              experiments::twin_table(groups).c_str());
  if (!args.json.empty()) {
    nlohmann::json doc = {{"experiment", experiment.name}, {"file", args.file}, {"command", command},
                          {"device", args.device},         {"tf32", args.tf32}, {"groups", nlohmann::json::array()}};
    for (const auto& g : groups) doc["groups"].push_back(group_json(g));
    util::write_file_atomically(args.json, doc.dump(1) + "\n");
  }
  return 0;
}

}  // namespace

int torch_churn_main(int argc, char** argv, const experiments::TwinTrainer& train, const CudaCheck& cuda_available) {
  Args args;
  CLI::App app{
      "torch_churn: an experiment's recipe trained by fplab's LibTorch twin (cuBLAS/cuDNN on a GPU), replicas "
      "in PyTorch's default and deterministic modes: the real churn, beside the simulated one"};
  app.add_option("file", args.file, "experiment TOML (its [data], [model], [training] recipe and replicas)")
      ->required();
  app.add_option("--device", args.device, "cuda (cuBLAS and cuDNN) or cpu (LibTorch's CPU kernels)")
      ->check(CLI::IsMember({"cuda", "cpu"}))
      ->capture_default_str();
  app.add_option("--modes", args.modes, "PyTorch modes, each a group of replicas: default, deterministic")
      ->delimiter(',')
      ->check(CLI::IsMember({"default", "deterministic"}))
      ->capture_default_str();
  app.add_option("--replicas", args.replicas, "replicas a mode, at least 2 (default: the experiment's)")
      ->check(CLI::Range(2, 1000));
  app.add_option("--variant", args.variant,
                 "which seeds vary between replicas: impl or control (none: only the hardware can differ), algo, "
                 "algo+impl (the algorithmic seed too)")
      ->check(CLI::IsMember({"impl", "control", "algo", "algo+impl"}))
      ->capture_default_str();
  app.add_option("--tf32", args.tf32,
                 "TF32 products on the GPU: off (fp32, as the simulator's CUDA-core profiles), cudnn (PyTorch's own "
                 "default: convolutions in TF32, GEMMs fp32), all (cuBLAS too)")
      ->check(CLI::IsMember({"off", "cudnn", "all"}))
      ->capture_default_str();
  app.add_option("--threads", args.threads, "LibTorch CPU threads")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--data-dir", args.data_dir, "folder of an IDX image data set: train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (each .gz or not), classes.txt optional (docs/data.md)")->capture_default_str();
  app.add_option("--json", args.json, "also write the groups, with every replica's SHA-256, as JSON to this file");
  app.add_flag("--quiet", args.quiet, "no progress on stderr");
  app.footer(
      "Examples:\n"
      "  torch_churn experiments/hardware.toml                 4 replicas a mode on the GPU, fp32\n"
      "  torch_churn experiments/hardware.toml --tf32 cudnn --json real.json   PyTorch's TF32 default\n"
      "  torch_churn experiments/quick.toml --device cpu --modes deterministic --replicas 2\n"
      "Compare the default-mode churn with `fplab run` of the same recipe on a GPU profile\n"
      "(docs/torch.md, \"Real churn on a GPU\"; docs/results.md, section 5). Where deterministic is among\n"
      "the modes, CUBLAS_WORKSPACE_CONFIG=:4096:8 is set for the whole run (unless set already).");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "torch_churn: error: " << e.what() << " (see torch_churn --help)\n";
    return 2;
  }
  std::string command = "torch_churn";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  try {
    return run(args, command, train, cuda_available);
  } catch (const std::exception& e) {
    std::cerr << "torch_churn: error: " << e.what() << '\n';
  }
  return 2;
}

}  // namespace fplab::app
