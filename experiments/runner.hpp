// Runs an experiment's replicas: profiles x variants x replicas, in parallel on local cores,
// each replica's result written atomically under out/replicas/ so that a killed run (even by
// SIGKILL) resumes without redoing a finished replica. Under mpirun the ranks share the replicas
// (by the OMPI_COMM_WORLD_* / PMI_* environment) and rank 0 writes the report once every
// replica's file is there: one result, identical to a single process's.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "experiments/experiment.hpp"
#include "models/dataset.hpp"

namespace fplab::experiments {

struct ReplicaRecord {
  std::string profile;
  Variant variant = Variant::control;
  size_t replica = 0;
  uint64_t algo_seed = 0, impl_seed = 0;
  double test_accuracy = 0, train_loss = 0, seconds = 0;
  std::string weights_sha256, predictions_sha256;
  std::vector<uint8_t> predictions;
  std::vector<float> weights, buffers;
};

// A profile name -> its default-mode and deterministic-mode op tables (in `format`).
using ProfileResolver = std::function<std::pair<profiles::OpTable, profiles::OpTable>(const std::string& profile)>;

struct RunOptions {
  std::string out_dir;
  size_t jobs = 1;
  bool resume = false;
  bool quiet = false;
  int rank = 0, ranks = 1;  // from the MPI launcher's environment by default
};
// rank and size of an mpirun launch (0, 1 otherwise).
std::pair<int, int> launcher_rank();

// All replicas' records in (profile, variant, replica) order. Ranks other than 0 return only
// their own replicas; rank 0 waits for the others' files and returns all.
std::vector<ReplicaRecord> run_experiment(const Experiment& experiment, const models::Dataset& data,
                                          const ProfileResolver& resolve, const RunOptions& options);

}  // namespace fplab::experiments
