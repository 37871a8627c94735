// Global average pooling (B, C, H, W) -> (B, C): the mean over H*W positions, a reduction that
// follows the bn_stats schedule (a statistics reduction, like BatchNorm's means).
#pragma once

#include "models/layer.hpp"

namespace fplab::models {

template <class T>
class GlobalAvgPool : public Layer<T> {
 public:
  std::string describe() const override { return "global_avg_pool"; }
  std::vector<size_t> output_shape(const std::vector<size_t>& in) const override { return {in[0], in[1]}; }
  Tensor<T> forward(const Tensor<T>& x, Context& ctx) override;
  Tensor<T> backward(const Tensor<T>& dy, Context& ctx) override;

 private:
  std::vector<size_t> input_shape_;
};

}  // namespace fplab::models
