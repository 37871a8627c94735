// Optimizers and the learning-rate schedule. Updates are elementwise fp32 (no reductions).
#pragma once

#include <string>
#include <vector>

#include "models/layer.hpp"

namespace fplab::models {

struct OptimizerSpec {
  std::string kind = "sgd";  // sgd | adam
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 0;                        // L2, added to the gradient (not to biases / BatchNorm)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam
  size_t decay_every = 0;                         // epochs between learning-rate decays (0: never)
  double decay_factor = 0.1;

  double lr_at(size_t epoch) const;  // step decay
};

template <class T>
class Optimizer {
 public:
  explicit Optimizer(OptimizerSpec spec) : spec_(std::move(spec)) {}
  // One update of every parameter from its gradient; `epoch` picks the learning rate.
  void step(const std::vector<Parameter<T>*>& params, size_t epoch);
  // The state (momenta / moments and the step count), for checkpoints.
  std::vector<std::vector<T>>& state() { return state_; }
  uint64_t& steps() { return steps_; }

 private:
  OptimizerSpec spec_;
  std::vector<std::vector<T>> state_;  // sgd: one velocity per parameter; adam: m and v
  uint64_t steps_ = 0;
};

}  // namespace fplab::models
