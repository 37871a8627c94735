// Replicas of an experiment's recipe trained by the LibTorch twin (models/torch/) instead of
// fplab's replay: on a GPU, real cuBLAS/cuDNN training, in PyTorch's default mode and in its
// deterministic mode, from the simulator's initial weights and batch order, so that the churn the
// real hardware gives can be set beside the churn fplab's profiles predict (docs/torch.md, "Real
// churn on a GPU"). The trainer is passed in, so that this file needs no LibTorch: the tests pass
// a stand-in, `torch_churn` (apps/) the twin.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "experiments/experiment.hpp"
#include "experiments/metrics.hpp"
#include "models/dataset.hpp"
#include "models/torch/torch_twin.hpp"

namespace fplab::experiments {

using TwinTrainer = std::function<models::torch_twin::TwinResult(const models::TrainConfig&, const models::Dataset&,
                                                                 const models::torch_twin::TwinOptions&)>;

struct TwinReplica {
  uint64_t algo_seed = 0;
  double test_accuracy = 0, seconds = 0;           // seconds: the training loop of all epochs
  std::string weights_sha256, predictions_sha256;  // of the raw fp32 bytes / label bytes
};

// One group: `replicas` runs of the recipe under one set of twin options.
struct TwinGroup {
  std::string mode;     // "default" or "deterministic"
  std::string backend;  // the twin's description of what computed (first replica's)
  Variant variant = Variant::impl;
  std::vector<TwinReplica> replicas;
  double accuracy_mean = 0, accuracy_sd = 0;  // fractions
  PairwiseSummary churn;                      // fractions; interval: bootstrap over replicas
  double l2 = 0;                              // mean pairwise normalized L2 of the final weights
  bool identical = false;                     // >= 2 replicas, weights and predictions all equal bit for bit
};

// Trains the replicas of `experiment`'s recipe for `variant` (seeds as Experiment::replica_config;
// the schedules are the twin's business) with `options`, and summarises them. progress(i, replica)
// after each replica. Throws what the trainer throws.
TwinGroup run_twin_group(const Experiment& experiment, const models::Dataset& data, Variant variant, size_t replicas,
                         const models::torch_twin::TwinOptions& options, const TwinTrainer& train,
                         const std::function<void(size_t, const TwinReplica&)>& progress = {});

// The groups as a table, a row each (accuracy, churn with its interval, L2, identical, seconds).
std::string twin_table(const std::vector<TwinGroup>& groups);

}  // namespace fplab::experiments
