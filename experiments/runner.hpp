// Runs an experiment's replicas: profiles x variants x replicas, in parallel on local cores,
// each replica's result written atomically under out/replicas/ so that a killed run (even by
// SIGKILL) resumes without redoing a finished replica. Under mpirun every rank trains every
// ranks-th replica into its own output folder and sends them to rank 0 through a ReplicaExchange
// (MPI); rank 0 keeps them with its own and writes the one report, identical to a single
// process's. No rank reads another's folder: the machines need not share one.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "experiments/experiment.hpp"
#include "experiments/replica_exchange.hpp"
#include "models/compute_backend.hpp"
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
  ReplicaExchange* exchange = nullptr;  // the ranks of a distributed run; null: one process
  // Where a replica's reductions run: a backend for its op table, made in the thread that trains
  // it (a GPU's: models/gpu_backend.hpp); null: the CPU engine.
  std::function<std::unique_ptr<models::ComputeBackend>(const profiles::OpTable&)> backend;
  // Told apart in the replicas' fingerprints (replica_fingerprint's source), so that a resumed run
  // keeps only replicas trained where it trains: "" for the CPU engine, "device=cuda" on a GPU,
  // whose atomics add in the hardware's order rather than the impl seed's.
  std::string replica_source;
};
// Whether an MPI launcher (mpirun, srun) started this process: OMPI_COMM_WORLD_SIZE, PMI_SIZE or
// PMIX_RANK is set.
bool under_mpi_launcher();

// All replicas' records in (profile, variant, replica) order. Ranks other than 0 return only
// their own replicas; rank 0 receives the others' and returns all. If any rank fails, every rank
// throws (the failed one its own error).
std::vector<ReplicaRecord> run_experiment(const Experiment& experiment, const models::Dataset& data,
                                          const ProfileResolver& resolve, const RunOptions& options);

}  // namespace fplab::experiments
