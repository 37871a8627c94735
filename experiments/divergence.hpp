// Divergence over time: two replicas trained side by side (the second replayed against the
// first's per-step weights), the distance between their weights after every step, and the first
// step and layer at which any bit differs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "models/trainer.hpp"

namespace fplab::experiments {

struct DivergencePoint {
  uint64_t step = 0;     // 0: the initial weights
  double l2 = 0;         // || w_a - w_b ||
  double relative = 0;   // || w_a - w_b || / || w_a ||
  size_t differing = 0;  // weights whose bits differ
};

struct Divergence {
  std::vector<DivergencePoint> curve;
  int64_t first_step = -1;  // -1: bit-identical throughout
  // Every parameter tensor that differs at that step, e.g. "layer 3 linear(784->128) weight"
  // (a nondeterministic reduction in one step reaches these tensors first).
  std::vector<std::string> first_layers;
  size_t parameters = 0;
};

// `progress` (optional) hears where the two trainings are, as text ("replica b: epoch 1, batch 3/40").
Divergence diverge(const models::TrainConfig& a, const models::TrainConfig& b, const models::Dataset& data,
                   const std::function<void(const std::string&)>& progress = {});

}  // namespace fplab::experiments
