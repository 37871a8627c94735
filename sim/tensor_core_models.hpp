// The one registry of tensor-core arithmetic: for each modelled device and input format, how many
// products one fused step adds (N), how many fraction bits survive the alignment (F), the input
// format its factors are converted to, and its accumulator's format. The `tc-*` schedule presets,
// the `fused(MODEL)` reducer of the schedule grammar, sim::tensor_core_model and the hardware
// profiles (which write `fused(tc-h100-tf32)`, never the numbers) all read it, so a device's facts
// are written once. Sources per entry: docs/tensor-cores.md.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "sim/schedule.hpp"

namespace fplab::sim {

struct TensorCoreModel {
  std::string_view name;         // "tc-h100-tf32": the preset's name and fused(MODEL)'s
  int products;                  // N
  int fraction_bits;             // F
  Reducer::Input input;          // the factors' conversion (none: used as they are)
  std::string_view accumulator;  // "fp32", or "e8m13" for Hopper's fp8 wgmma
  std::string_view description;  // one line
};

// Every model, in a fixed order.
std::span<const TensorCoreModel> tensor_core_models();
// The model of that name, or nullptr.
const TensorCoreModel* find_tensor_core_model(std::string_view name);
// "tc-v100, tc-a100, ...": for error messages.
std::string tensor_core_model_list();

// The schedule reducer fused(N,F[,INPUT]) of a model.
Reducer fused_reducer(const TensorCoreModel& model);

}  // namespace fplab::sim
