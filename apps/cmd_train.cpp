// fplab train: train a model on Fashion-MNIST with every reduction following a schedule.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "fp/format.hpp"

#include "apps/cli_support.hpp"
#include "apps/commands.hpp"
#include "apps/device_option.hpp"
#include "models/checkpoint_io.hpp"
#include "profiles/hw_profile.hpp"
#include "models/recipe_limits.hpp"
#include "models/trainer.hpp"
#include "util/progress.hpp"

namespace fplab::app {
namespace {

struct TrainArgs {
  std::string model = "mlp";
  std::vector<size_t> hidden = {128};
  size_t kernel = 3;
  double dropout = 0;
  // Defaults: Adam, lr 1e-3, batch 64 reach >= 80% test accuracy in one epoch on 10 000 examples.
  size_t epochs = 1, batch = 64, subset = 0;
  double lr = 0.001, momentum = 0.9, weight_decay = 0;
  std::string optimizer = "adam";
  size_t decay_every = 0;
  double decay_factor = 0.1;
  int augment_pad = 0;
  bool flip = false;
  std::string imbalance;  // CLASS:PERCENT
  std::string data_dir = models::kFashionMnistDir;
  std::string schedules = "seq";
  std::string profile;  // NAME[:default|deterministic]
  std::vector<std::string> profiles_dir;
  std::string device = "cpu";
  std::string format = "fp32";
  uint64_t algo_seed = 1, impl_seed = 1;
  std::string save_weights, checkpoint;
  size_t checkpoint_every = 50;
  bool resume = false, json = false, quiet = false;
  std::string config;
};

// Every number against the rule the experiment files follow too (models/recipe_limits.hpp).
void check_numbers(const TrainArgs& a) {
  auto check = [](const char* option, std::string_view key, double value) {
    try {
      models::check_recipe_number(key, value);
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string(option) + " " + e.what());
    }
  };
  check("--lr", "lr", a.lr);
  check("--momentum", "momentum", a.momentum);
  check("--weight-decay", "weight_decay", a.weight_decay);
  check("--dropout", "dropout", a.dropout);
  check("--lr-decay-factor", "lr_decay_factor", a.decay_factor);
  check("--lr-decay-every", "lr_decay_every", static_cast<double>(a.decay_every));
  check("--epochs", "epochs", static_cast<double>(a.epochs));
  check("--batch", "batch", static_cast<double>(a.batch));
  check("--train-subset", "train_subset", static_cast<double>(a.subset));
  check("--augment-pad", "augment_pad", a.augment_pad);
  check("--kernel", "kernel", static_cast<double>(a.kernel));
  check("--checkpoint-every", "checkpoint_every", static_cast<double>(a.checkpoint_every));
  for (size_t h : a.hidden) check("--hidden", "hidden", static_cast<double>(h));
}

models::TrainConfig make_config(const TrainArgs& a) {
  check_numbers(a);
  models::TrainConfig c;
  c.model = {a.model, a.hidden, a.kernel, a.dropout};
  // Refused here, before anything is printed or loaded (models/build_model refuses it too).
  if (std::find(a.hidden.begin(), a.hidden.end(), size_t{0}) != a.hidden.end())
    throw UsageError("--hidden: every layer needs at least 1 unit (0 makes a layer of width 0)");
  c.optimizer.kind = a.optimizer;
  c.optimizer.lr = a.lr;
  c.optimizer.momentum = a.momentum;
  c.optimizer.weight_decay = a.weight_decay;
  c.optimizer.decay_every = a.decay_every;
  c.optimizer.decay_factor = a.decay_factor;
  if (a.optimizer != "sgd" && a.optimizer != "adam") throw UsageError("--optimizer must be sgd or adam");
  c.epochs = a.epochs;
  c.batch = a.batch;
  c.selection.subset = a.subset;
  if (!a.imbalance.empty()) {
    const auto colon = a.imbalance.find(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument("");
      c.selection.imbalance_class = std::stoi(a.imbalance.substr(0, colon));
      c.selection.imbalance_percent = std::stod(a.imbalance.substr(colon + 1));
    } catch (const std::exception&) {
      throw UsageError("--imbalance must be CLASS:PERCENT, e.g. 3:2 (keep 2% of class 3)");
    }
    if (c.selection.imbalance_class < 0 || c.selection.imbalance_class > 255 ||
        !(c.selection.imbalance_percent >= 0 && c.selection.imbalance_percent <= 100))
      throw UsageError("--imbalance: CLASS must be a class of the data set and PERCENT from 0 to 100");
  }
  c.augmentation = {a.augment_pad, a.flip};
  if (!a.profile.empty()) {
    // NAME or PATH, then an optional :default or :deterministic (a path may itself hold ':').
    auto colon = a.profile.rfind(':');
    std::string mode = colon == std::string::npos ? "default" : a.profile.substr(colon + 1);
    if (mode != "default" && mode != "deterministic") {
      if (!profiles::is_hw_profile_path(a.profile))
        throw UsageError("--profile takes NAME, NAME:default or NAME:deterministic (or a .toml path), not '" +
                         a.profile + "'");
      colon = std::string::npos;
      mode = "default";
    }
    const auto profile = profiles::find_hw_profile(a.profile.substr(0, colon), a.profiles_dir);
    c.ops = mode == "default" ? profile.default_ops : profile.deterministic_ops;
    if (a.format == "exact")
      c.ops = profiles::op_table_preset("exact");
    else if (a.format != "fp32")
      c.ops.set_format(fp::parse_format(a.format));
  } else {
    c.ops = std::filesystem::exists(a.schedules)
                ? profiles::load_op_table(a.schedules, a.format == "fp32" ? "" : a.format)
                : profiles::op_table_preset(a.schedules, a.format);
  }
  c.algo_seed = a.algo_seed;
  c.impl_seed = a.impl_seed;
  c.checkpoint = a.checkpoint;
  c.checkpoint_every = std::max<size_t>(1, a.checkpoint_every);
  c.resume = a.resume;
  if (a.resume && a.checkpoint.empty()) throw UsageError("--resume needs --checkpoint FILE");
  return c;
}

// The backend for --device (nullptr: the CPU engine).
std::unique_ptr<models::ComputeBackend> make_backend(const std::string& device, const profiles::OpTable& ops,
                                                     bool chatty) {
  return device_is_gpu(device, {ops}, chatty) ? gpu_backend(ops) : nullptr;
}

int run_train(const TrainArgs& args) {
  models::TrainConfig config = make_config(args);
  const bool chatty = !args.quiet;
  const auto backend = make_backend(args.device, config.ops, chatty);
  config.backend = backend.get();
  const std::string device = backend ? backend->name() : "cpu";
  const models::Dataset data = models::load_image_dataset(args.data_dir);
  if (chatty)
    std::fprintf(stderr, "training %s on %zu Fashion-MNIST examples for %zu epoch(s)\n  schedules: %s\n  device: %s\n",
                 args.model.c_str(), args.subset ? args.subset : data.train.size(), args.epochs,
                 config.ops.describe().c_str(), device.c_str());
  util::Progress progress(chatty);
  size_t epoch_now = 0;
  const auto result = models::train(
      config, data,
      [&](const models::EpochReport& e) {
        char line[160];
        std::snprintf(line, sizeof line,
                      "epoch %zu/%zu: train loss %.4f, test accuracy %.2f%%, %.0f examples/s (%.1f s)", e.epoch,
                      args.epochs, e.train_loss, 100 * e.test_accuracy, e.examples_per_second, e.seconds);
        progress.note(line);
      },
      [&](size_t epoch, size_t batch, size_t batches) {
        epoch_now = epoch;
        progress.update("  epoch " + std::to_string(epoch + 1) + "/" + std::to_string(args.epochs) + ": batch " +
                        std::to_string(batch + 1) + "/" + std::to_string(batches));
      },
      {},
      [&](size_t done, size_t total) {
        progress.update("  epoch " + std::to_string(epoch_now + 1) + "/" + std::to_string(args.epochs) +
                        ": evaluating, " + std::to_string(done) + "/" + std::to_string(total) + " test images");
      });
  progress.finish();
  if (!args.save_weights.empty()) {
    models::CheckpointWriter w;
    w.add("parameters", std::span<const float>(result.weights));
    w.add("buffers", std::span<const float>(result.buffers));
    std::vector<uint64_t> predictions(result.predictions.begin(), result.predictions.end());
    w.add("test_predictions", std::span<const uint64_t>(predictions));
    w.write(args.save_weights);
  }
  std::vector<double> per_class(10, 0), counts(10, 0);
  for (size_t i = 0; i < result.predictions.size(); ++i) {
    counts[data.test.labels[i]] += 1;
    per_class[data.test.labels[i]] += result.predictions[i] == data.test.labels[i];
  }
  for (size_t c = 0; c < 10; ++c) per_class[c] = counts[c] > 0 ? per_class[c] / counts[c] : 0;
  if (args.json) {
    nlohmann::json history = nlohmann::json::array();
    for (const auto& e : result.history)
      history.push_back({{"epoch", e.epoch},
                         {"train_loss", e.train_loss},
                         {"test_accuracy", e.test_accuracy},
                         {"seconds", e.seconds},
                         {"examples_per_second", e.examples_per_second}});
    print_json({{"test_accuracy", result.test_accuracy},
                {"train_loss", result.train_loss},
                {"weights_sha256", result.weights_sha256},
                {"predictions_sha256", result.predictions_sha256},
                {"epochs", result.epochs},
                {"steps", result.steps},
                {"resumed", result.resumed},
                {"model", args.model},
                {"schedules", config.ops.describe()},
                {"device", device},
                {"algo_seed", args.algo_seed},
                {"impl_seed", args.impl_seed},
                {"per_class_accuracy", per_class},
                {"history", history}});
  } else {
    std::printf("test accuracy   %.2f%%\ntrain loss      %.4f\nweights sha256  %s\npredictions     %s\n",
                100 * result.test_accuracy, result.train_loss, result.weights_sha256.c_str(),
                result.predictions_sha256.c_str());
  }
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app, Runner& run) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model on Fashion-MNIST, every reduction following a schedule");
  cmd->add_option("--config", a->config,
                  "TOML file with any of these options by long name (epochs = 3); flags override it");
  cmd->add_option("--model", a->model, "mlp, small_cnn, small_cnn_bn, medium_cnn")->capture_default_str();
  cmd->add_option("--hidden", a->hidden, "mlp hidden sizes, e.g. --hidden 256 128")
      ->capture_default_str()
      ->check(whole_number());
  cmd->add_option("--kernel", a->kernel, "medium_cnn kernel size (1, 3, 5, 7)")
      ->capture_default_str()
      ->check(whole_number());
  cmd->add_option("--dropout", a->dropout, "dropout before the last layer")->capture_default_str();
  cmd->add_option("--epochs", a->epochs, "epochs")->capture_default_str()->check(whole_number());
  cmd->add_option("--batch", a->batch, "batch size (0: the whole training set as one batch)")
      ->capture_default_str()
      ->check(whole_number());
  cmd->add_option("--lr", a->lr, "learning rate")->capture_default_str();
  cmd->add_option("--optimizer", a->optimizer, "sgd or adam")->capture_default_str();
  cmd->add_option("--momentum", a->momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--weight-decay", a->weight_decay, "L2 weight decay")->capture_default_str();
  cmd->add_option("--lr-decay-every", a->decay_every, "epochs between learning-rate decays (0: none)")
      ->capture_default_str()
      ->check(whole_number());
  cmd->add_option("--lr-decay-factor", a->decay_factor, "learning-rate decay factor")->capture_default_str();
  cmd->add_option("--train-subset", a->subset, "use N training examples, stratified by class (0: all)")
      ->capture_default_str()
      ->check(whole_number());
  cmd->add_option("--imbalance", a->imbalance, "CLASS:PERCENT keep only PERCENT% of one class's training examples");
  cmd->add_option("--augment-pad", a->augment_pad, "random crop with this padding (0: none)")->capture_default_str();
  cmd->add_flag("--flip", a->flip, "random horizontal flips");
  cmd->add_option(
         "--data-dir", a->data_dir,
         "folder of an IDX image data set: train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
         "t10k-labels-idx1-ubyte (each .gz or not), classes.txt optional (docs/data.md)")
      ->capture_default_str();
  CLI::Option* schedules =
      cmd->add_option("--schedules", a->schedules, "preset (seq, pairwise, gpu, atomic, exact) or a TOML file")
          ->capture_default_str();
  cmd->add_option("--profile", a->profile,
                  "schedules of a hardware profile (fplab profile list): NAME or NAME:deterministic")
      ->excludes(schedules);
  add_profiles_dir_option(cmd, a->profiles_dir);
  cmd->add_option("--device", a->device,
                  "where the reductions run: cpu (the engine), cuda (our CUDA kernels; deterministic schedules give "
                  "the same bits), auto (cuda if it can, else cpu)")
      ->capture_default_str();
  cmd->add_option("--format", a->format, "accumulation format of every reduction, or exact")->capture_default_str();
  cmd->add_option("--algo-seed", a->algo_seed, "algorithmic seed: init, subset, order, augmentation, dropout")
      ->capture_default_str()
      ->check(whole_number());
  cmd->add_option("--impl-seed", a->impl_seed, "implementation seed: atomic orders, shuffles, sr")
      ->capture_default_str()
      ->check(whole_number());
  cmd->add_option("--save-weights", a->save_weights, "write the final weights and test predictions (atomically)");
  cmd->add_option("--checkpoint", a->checkpoint, "checkpoint file, written atomically during training");
  cmd->add_option("--checkpoint-every", a->checkpoint_every, "batches between checkpoints")
      ->capture_default_str()
      ->check(whole_number());
  cmd->add_flag("--resume", a->resume, "continue from --checkpoint if it exists (same bits as an uninterrupted run)");
  cmd->add_flag("--quiet", a->quiet, "no progress on stderr");
  cmd->add_flag("--json", a->json, "print JSON");
  cmd->footer(
      "Examples:\n"
      "  fplab train --train-subset 10000 --epochs 1\n"
      "  fplab train --model small_cnn --schedules gpu --impl-seed 2 --epochs 3 --json\n"
      "  fplab train --format exact --schedules atomic --train-subset 5000    # exact: the order cannot matter\n"
      "  fplab train --profile h100:deterministic --device cuda --json    # on a GPU: the weights of --device cpu\n"
      "  fplab train --checkpoint run.ckpt --resume --epochs 5    # continue a killed run\n"
      "  printf 'model = \"small_cnn\"\\ntrain-subset = 5000\\n' > run.toml && fplab train --config run.toml --epochs "
      "2");
  cmd->callback([&run, a, cmd] {
    run = [a, cmd] {
      if (!a->config.empty()) apply_toml_config(cmd, a->config);
      return run_train(*a);
    };
  });
}

}  // namespace fplab::app
