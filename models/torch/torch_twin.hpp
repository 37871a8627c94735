// The LibTorch twin of an fplab model: the same architecture built from LibTorch's own operators
// (at::linear, at::conv2d, at::batch_norm, at::max_pool2d, cross-entropy, autograd), started from
// fplab's initial weights bit for bit and trained over exactly the batches of fplab's trainer
// (models/trainer.cpp: same selection, epoch order, augmentation and dropout masks, drawn from
// models/algo_noise and models/augment). What differs is only how LibTorch reduces (OpenBLAS,
// oneDNN, its own softmax and BatchNorm kernels) and, with UpdateRule::libtorch, how
// torch::optim rounds its updates. It is an independent check of fplab's hand-written backprop
// and the reference that real cuBLAS/cuDNN churn is held against (docs/architecture.md, "GPU side").
//
// Assumptions, stated once: the model comes from models::build_model (BatchNorm momentum 0.1,
// eps 1e-5; at most one dropout, of probability ModelSpec::dropout); the twin computes in fp32
// (on a GPU, TF32 products only when asked); checkpoints and resuming are fplab's business, not
// the twin's.
//
// This header does not include LibTorch: only torch_twin.cpp does, so the tests and benchmarks
// that use the twin compile at fplab's usual speed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "models/trainer.hpp"

namespace fplab::models::torch_twin {

// How the optimizer step is computed once the gradients are there.
enum class UpdateRule {
  fplab,     // fplab's formulas (models/optimizer.cpp) as LibTorch elementwise ops, one rounding
             // per operation in the same order: identical inputs give identical bits
  libtorch,  // torch::optim::SGD / torch::optim::Adam (same hyper-parameters; their roundings,
             // e.g. a fused multiply-add in p.add_(buf, -lr))
};

// Where the twin computes: LibTorch's CPU kernels, or cuBLAS and cuDNN on the first CUDA device
// (a LibTorch built with CUDA, e.g. the GPU machine's PyTorch install: docs/torch.md).
enum class Device { cpu, cuda };
struct TwinOptions {
  Device device = Device::cpu;
  int threads = 1;  // at::set_num_threads, and OpenBLAS's own pool where it is loaded
  // CPU: at::globalContext().setDeterministicAlgorithms(deterministic, false). CUDA: also
  // cuDNN's deterministic algorithms (cudnn.deterministic), ops without a deterministic form only
  // warning; false is PyTorch's default mode (cuDNN may pick algorithms that accumulate with
  // atomics). cuDNN's benchmark mode stays off in both. Deterministic cuBLAS also needs
  // CUBLAS_WORKSPACE_CONFIG=:4096:8 in the environment before the process's first GEMM: the
  // caller's business (torch_churn sets it at its start), reported in TwinResult::backend.
  // Every flag is set on every call, so one call's settings never leak into the next.
  bool deterministic = true;
  bool tf32_cublas = false;  // CUDA: cuBLAS may multiply in TF32 (PyTorch's default: no)
  bool tf32_cudnn = false;   // CUDA: cuDNN may multiply in TF32 (PyTorch's default: yes)
  UpdateRule update = UpdateRule::fplab;
  size_t max_steps = 0;  // stop after this many optimizer steps (0: all epochs)
  bool evaluate = true;  // predict the test set after the last step
  BatchFn on_batch;      // after every step, as train()'s (epoch, batch, batches)
};

struct TwinResult {
  std::vector<float> losses;         // the mean loss of every step, in order
  std::vector<float> weights;        // every parameter in fplab's layout and model order (as TrainResult::weights)
  std::vector<float> buffers;        // BatchNorm running statistics, as TrainResult::buffers
  std::vector<uint8_t> predictions;  // test-set labels in order, evaluation mode, batches of 200
  double test_accuracy = 0;
  std::vector<double> epoch_seconds;  // the training loop of each epoch (batches, forward, backward, step)
  size_t steps = 0;
  std::string backend;  // what LibTorch computes with, e.g. "LibTorch 1.13.1, OpenBLAS, oneDNN, 1 thread"
};

// Whether this LibTorch can run the twin on a CUDA device; if not, *why says so in one line.
bool cuda_available(std::string* why = nullptr);
// The parameters fplab's trainer starts from for this config (fplab layout, model order).
std::vector<float> initial_weights(const TrainConfig& config, const Dataset& data);

// Trains the LibTorch twin of config.model as train(config, data) trains the fplab model (the
// schedules in config.ops are ignored: LibTorch reduces as it does). Throws std::invalid_argument
// for a layer the twin does not know, std::runtime_error for Device::cuda where cuda_available()
// is false and for LibTorch's own errors (their first line, without LibTorch's backtrace).
TwinResult train(const TrainConfig& config, const Dataset& data, const TwinOptions& options = {});

// How one fplab parameter maps onto LibTorch's, for the documentation and the tests.
struct ParameterMapping {
  std::string name;                  // "layer 0 conv2d weight"
  std::vector<size_t> fplab_shape;   // e.g. {C*kh*kw, C_out}
  std::vector<int64_t> torch_shape;  // e.g. {C_out, C, kh, kw}
  bool transposed = false;           // torch = fplab^T (then reshaped)
};
std::vector<ParameterMapping> parameter_mapping(const ModelSpec& spec,
                                                const std::vector<size_t>& input_shape = {1, 28, 28});

}  // namespace fplab::models::torch_twin
