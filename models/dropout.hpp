// Dropout (inverted): in training each element is kept with probability 1 - p and scaled by
// 1 / (1 - p); the mask is algorithmic noise, drawn from the algorithmic seed keyed by (layer,
// step), so a replay or a resumed run draws the same masks. Identity in evaluation.
#pragma once

#include "models/layer.hpp"

namespace fplab::models {

template <class T>
class Dropout : public Layer<T> {
 public:
  explicit Dropout(double p) : p_(p) {}
  std::string describe() const override { return "dropout(" + std::to_string(p_) + ")"; }
  std::vector<size_t> output_shape(const std::vector<size_t>& in) const override { return in; }
  Tensor<T> forward(const Tensor<T>& x, Context& ctx) override;
  Tensor<T> backward(const Tensor<T>& dy, Context& ctx) override;

 private:
  double p_;
  std::vector<T> scale_;  // 0 or 1 / (1 - p) per element of the last training input
};

}  // namespace fplab::models
