// The training loop: a model trained on Fashion-MNIST with every reduction following the
// OpTable's schedules, algorithmic noise from the algo seed and implementation noise from the
// impl seed. Checkpoints (atomic) let a killed run resume to the same bits.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "models/augment.hpp"
#include "models/algo_noise.hpp"
#include "models/compute_backend.hpp"
#include "models/dataset.hpp"
#include "models/model.hpp"
#include "profiles/op_table.hpp"
#include "models/optimizer.hpp"

namespace fplab::models {

struct TrainConfig {
  ModelSpec model;
  OptimizerSpec optimizer;
  size_t epochs = 1;
  size_t batch = 128;        // 0: the whole (selected) training set as one batch
  TrainSelection selection;  // subset and class imbalance
  Augmentation augmentation;
  profiles::OpTable ops = profiles::op_table_preset("seq");
  uint64_t algo_seed = 1, impl_seed = 1;
  // The seed of the data order alone (0: the algo seed). Varying only this isolates the
  // effect of the order of examples (and so of the batch reductions' terms).
  uint64_t order_seed = 0;
  // Flip the lowest mantissa bit of this initial weight (index into all parameters in model
  // order, taken modulo their count); -1: none. One bit of difference (Summers & Dinneen 2021).
  int64_t flip_weight = -1;
  std::string checkpoint;        // path; empty: no checkpoints
  size_t checkpoint_every = 50;  // batches between checkpoints (and one at every epoch end)
  bool resume = false;           // continue from `checkpoint` if it exists
  // Evaluate on the test set after every epoch (false: after the last one only; earlier epochs
  // then report a NaN test accuracy). Experiments only need the final model.
  bool evaluate_every_epoch = true;
  // Where the reductions run (not owned; nullptr: the CPU engine). Not part of the fingerprint:
  // under deterministic schedules a backend gives the engine's bits, so a checkpoint written on
  // one resumes on the other.
  ComputeBackend* backend = nullptr;
  // Where the run is: a fingerprint of everything above that changes the bits, so a checkpoint
  // is only resumed by the same run.
  std::string fingerprint() const;
};

struct EpochReport {
  size_t epoch = 0;  // 1-based
  double train_loss = 0;
  double test_accuracy = 0;
  double seconds = 0;
  double examples_per_second = 0;
};

struct TrainResult {
  double test_accuracy = 0;
  double train_loss = 0;  // mean over the last epoch's batches
  size_t epochs = 0;
  std::string weights_sha256;      // of every parameter (model order) then every buffer, as fp32 bytes
  std::string predictions_sha256;  // of the test predictions, one byte per example in test order
  std::vector<uint8_t> predictions;
  std::vector<float> weights;  // all parameters, model order
  std::vector<float> buffers;  // BatchNorm running statistics, model order
  std::vector<EpochReport> history;
  size_t steps = 0;
  bool resumed = false;
};

using ProgressFn = std::function<void(const EpochReport&)>;
using BatchFn = std::function<void(size_t epoch, size_t batch, size_t batches)>;  // after every batch
// During an evaluation of the test set: examples predicted so far, of `total` (evaluating a
// large test set under emulated formats takes longer than training on a subset).
using EvaluationFn = std::function<void(size_t done, size_t total)>;
// With the model after initialisation (step 0) and after every optimiser step (1, 2, ...).
using StepFn = std::function<void(uint64_t step, Model<float>& model)>;

// The model of `config` with its initial weights (from the algorithmic seed, plus the one-bit flip
// of `flip_weight`), for inputs shaped like `set`: what train() starts from.
Model<float> initial_model(const TrainConfig& config, const ImageSet& set);

TrainResult train(const TrainConfig& config, const Dataset& data, const ProgressFn& progress = {},
                  const BatchFn& on_batch = {}, const StepFn& on_step = {}, const EvaluationFn& on_evaluation = {});

// Predictions of a model on a set, in evaluation mode, with noise keys from `call`.
std::vector<uint8_t> predict(Model<float>& model, const ImageSet& set, const profiles::OpTable& ops, uint64_t impl_seed,
                             uint64_t call, size_t batch = 200, ComputeBackend* backend = nullptr,
                             const EvaluationFn& on_evaluation = {});

}  // namespace fplab::models
