// ReLU: y = max(x, 0); the gradient passes where x > 0.
#pragma once

#include "models/layer.hpp"

namespace fplab::models {

template <class T>
class ReLU : public Layer<T> {
 public:
  std::string describe() const override { return "relu"; }
  std::vector<size_t> output_shape(const std::vector<size_t>& in) const override { return in; }
  Tensor<T> forward(const Tensor<T>& x, Context& ctx) override {
    Tensor<T> y = x;
    for (auto& v : y.data) v = v > T(0) ? v : T(0);
    if (ctx.training) input_ = x;
    return y;
  }
  Tensor<T> backward(const Tensor<T>& dy, Context&) override {
    Tensor<T> dx = dy;
    for (size_t i = 0; i < dx.size(); ++i)
      if (!(input_.data[i] > T(0))) dx.data[i] = T(0);
    return dx;
  }

 private:
  Tensor<T> input_;
};

// Flatten: (B, ...) -> (B, prod(...)); no arithmetic.
template <class T>
class Flatten : public Layer<T> {
 public:
  std::string describe() const override { return "flatten"; }
  std::vector<size_t> output_shape(const std::vector<size_t>& in) const override {
    return {in[0], Tensor<T>::count(in) / in[0]};
  }
  Tensor<T> forward(const Tensor<T>& x, Context&) override {
    shape_ = x.shape;
    Tensor<T> y = x;
    y.shape = output_shape(x.shape);
    return y;
  }
  Tensor<T> backward(const Tensor<T>& dy, Context&) override {
    Tensor<T> dx = dy;
    dx.shape = shape_;
    return dx;
  }

 private:
  std::vector<size_t> shape_;
};

}  // namespace fplab::models
