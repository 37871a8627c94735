// What a layer needs to know while it computes: how the device adds (the OpTable), the seeds, and
// which step of which layer this is, so that every reduction's noise key is fixed by position
// and a run can be replayed or resumed bit for bit.
#pragma once

#include <cstdint>

#include "fp/counter_rng.hpp"
#include "models/compute_backend.hpp"
#include "profiles/op_table.hpp"
#include "sim/noise.hpp"

namespace fplab::models {

struct Context {
  const profiles::OpTable* ops = nullptr;
  // Where fp32 reductions run (nullptr: the CPU engine); double (the gradient tests) always on the CPU.
  ComputeBackend* backend = nullptr;
  uint64_t impl_seed = 0;  // implementation noise: atomic orders, shuffles, stochastic rounding
  uint64_t algo_seed = 0;  // algorithmic noise (models/algo_noise.hpp): init, data, dropout
  uint64_t call = 0;       // the training step (or an evaluation batch, in its own range)
  uint64_t layer = 0;      // index of the layer computing now
  // The linear, convolution or batch norm layer computing now (nullptr in any other), for profiles whose
  // kernels differ per layer shape (OpTable::layer_rules).
  const profiles::LayerShape* layer_shape = nullptr;
  bool training = true;
  // false while the first layer runs backward: nobody needs dL/d(input images), so Linear and
  // Conv2d skip that GEMM and return an empty tensor (keys are positional: other bits unchanged).
  bool input_grad = true;

  // What reduction `op` uses here.
  const profiles::OpChoice& choice(profiles::OpKind op) const { return ops->choice(op, layer_shape); }

  // The noise key of reduction `op` of this layer at this call; `part` tells apart several
  // reductions of one kind in one layer (e.g. BatchNorm's mean and variance).
  sim::NoiseKey key(profiles::OpKind op, uint64_t part = 0) const {
    return {impl_seed, fp::mix_key({layer, static_cast<uint64_t>(op), part}), call, 0, 0};
  }
};

// Sets ctx.layer_shape while a linear, convolution or batch norm layer computes; restores it after.
class LayerShapeScope {
 public:
  LayerShapeScope(Context& ctx, const profiles::LayerShape& shape) : ctx_(ctx), saved_(ctx.layer_shape) {
    ctx.layer_shape = &shape;
  }
  ~LayerShapeScope() { ctx_.layer_shape = saved_; }
  LayerShapeScope(const LayerShapeScope&) = delete;
  LayerShapeScope& operator=(const LayerShapeScope&) = delete;

 private:
  Context& ctx_;
  const profiles::LayerShape* saved_;
};

// Evaluation batches use calls from this offset on, so they never share keys with training steps.
inline constexpr uint64_t kEvaluationCalls = uint64_t{1} << 62;

}  // namespace fplab::models
