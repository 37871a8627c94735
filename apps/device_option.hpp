// --device for the commands that train (fplab train, fplab run): cpu, cuda or auto. Where the
// reductions of training run: the CPU engine, or fplab's CUDA kernels (models/gpu_backend.hpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/compute_backend.hpp"
#include "profiles/op_table.hpp"

namespace fplab::app {

// Whether training under every one of `tables` runs on the GPU: "cpu" no; "cuda" yes, or a
// UsageError of one line (no usable GPU, fplab built without CUDA, an op the kernels cannot run);
// "auto" where it can, else no, saying why on stderr when chatty. Any other name: UsageError.
bool device_is_gpu(const std::string& device, const std::vector<profiles::OpTable>& tables, bool chatty);

// The GPU backend for `table` on the current thread's device (device_is_gpu said yes).
std::unique_ptr<models::ComputeBackend> gpu_backend(const profiles::OpTable& table);

// The GPU an MPI rank trains on: its rank among the ranks of its machine (OMPI_COMM_WORLD_LOCAL_RANK,
// MPI_LOCALRANKID, SLURM_LOCALID; else its world rank) modulo the machine's GPUs.
int gpu_of_rank(int world_rank);

// Makes `index` the GPU the calling thread's kernels run on.
void use_gpu(int index);

}  // namespace fplab::app
