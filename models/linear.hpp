// Fully connected layer y = x W + b, W stored (in x out) so the forward pass is one GEMM.
#pragma once

#include "models/layer.hpp"

namespace fplab::models {

template <class T>
class Linear : public Layer<T> {
 public:
  Linear(size_t in, size_t out);
  std::string describe() const override;
  std::vector<size_t> output_shape(const std::vector<size_t>& in) const override { return {in[0], out_}; }
  Tensor<T> forward(const Tensor<T>& x, Context& ctx) override;
  Tensor<T> backward(const Tensor<T>& dy, Context& ctx) override;
  std::vector<Parameter<T>*> parameters() override { return {&weight_, &bias_}; }
  void initialize(const Context& ctx) override;

 private:
  size_t in_, out_;
  Parameter<T> weight_, bias_;
  Tensor<T> input_;
};

}  // namespace fplab::models
