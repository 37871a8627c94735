// torch_churn: an experiment's recipe trained by the LibTorch twin, replicas in PyTorch's default
// and deterministic modes, on a GPU (cuBLAS, cuDNN) or the CPU: the real churn beside the
// simulated one (docs/torch.md, "Real churn on a GPU"). The program's body lives here, built on
// every machine (and tested with a stand-in trainer); torch_churn_main.cpp only hands it the twin,
// so that on the GPU machine only the twin and that one line are compiled against its LibTorch.
#pragma once

#include <functional>
#include <string>

#include "experiments/twin_replicas.hpp"

namespace fplab::app {

using CudaCheck = std::function<bool(std::string* why)>;

// The whole program: parses argv, trains, prints progress on stderr and the table on stdout,
// writes --json atomically. Returns the exit code (2 with one line on stderr for bad input, a
// missing dataset or an unavailable device).
int torch_churn_main(int argc, char** argv, const experiments::TwinTrainer& train, const CudaCheck& cuda_available);

}  // namespace fplab::app
