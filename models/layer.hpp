// A layer of a model, with forward and backward written by hand: every reduction goes through
// compute.hpp (and so through the schedule its kind is given); elementwise work (activations,
// pooling, normalisation, bias adds, optimizer updates) is plain host arithmetic in T.
// T is float for training and double for the fp64 finite-difference tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/context.hpp"
#include "models/tensor.hpp"

namespace fplab::models {

template <class T>
struct Parameter {
  std::string name;
  Tensor<T> value, grad;
  bool weight_decay = true;  // biases and BatchNorm parameters are not decayed
};

template <class T>
class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string describe() const = 0;
  // Shape of the output for an input of shape `in` (batch first).
  virtual std::vector<size_t> output_shape(const std::vector<size_t>& in) const = 0;
  virtual Tensor<T> forward(const Tensor<T>& x, Context& ctx) = 0;
  // Given dL/dy, accumulates nothing: sets the parameters' gradients and returns dL/dx.
  virtual Tensor<T> backward(const Tensor<T>& dy, Context& ctx) = 0;
  virtual std::vector<Parameter<T>*> parameters() { return {}; }
  // Non-trainable state that belongs to the model (BatchNorm running statistics).
  virtual std::vector<Tensor<T>*> buffers() { return {}; }
  // Draws initial weights from the algorithmic seed (ctx.layer is set).
  virtual void initialize(const Context&) {}
};

template <class T>
using LayerPtr = std::unique_ptr<Layer<T>>;

}  // namespace fplab::models
