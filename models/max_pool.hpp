// 2 x 2 max pooling with stride 2 (floor), on (B, C, H, W); ties go to the first maximum in
// row-major order within the window. Spatial sizes below 2 pass through unchanged (the deep
// blocks of medium_cnn on 28 x 28 inputs).
#pragma once

#include "models/layer.hpp"

namespace fplab::models {

template <class T>
class MaxPool2d : public Layer<T> {
 public:
  std::string describe() const override { return "maxpool(2x2)"; }
  std::vector<size_t> output_shape(const std::vector<size_t>& in) const override {
    if (in[2] < 2 || in[3] < 2) return in;
    return {in[0], in[1], in[2] / 2, in[3] / 2};
  }
  Tensor<T> forward(const Tensor<T>& x, Context& ctx) override;
  Tensor<T> backward(const Tensor<T>& dy, Context& ctx) override;

 private:
  std::vector<size_t> input_shape_;
  std::vector<size_t> argmax_;  // per output element, the input index it came from
};

}  // namespace fplab::models
