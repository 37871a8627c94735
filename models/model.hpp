// A model: a sequence of layers, and the builders of the models the experiments use.
#pragma once

#include <string>
#include <vector>

#include "models/layer.hpp"

namespace fplab::models {

template <class T>
class Model {
 public:
  Model(std::string name, std::vector<size_t> input_shape)
      : name_(std::move(name)), input_shape_(std::move(input_shape)) {}
  void add(LayerPtr<T> layer) { layers_.push_back(std::move(layer)); }

  // Layer i computes with ctx.layer = i.
  Tensor<T> forward(const Tensor<T>& x, Context& ctx);
  void backward(const Tensor<T>& dlogits, Context& ctx);
  void initialize(const Context& ctx);

  std::vector<Parameter<T>*> parameters();
  std::vector<Tensor<T>*> buffers();
  size_t parameter_count();
  std::string describe() const;
  const std::string& name() const { return name_; }
  const std::vector<size_t>& input_shape() const { return input_shape_; }
  size_t layer_count() const { return layers_.size(); }
  Layer<T>& layer(size_t i) { return *layers_[i]; }

 private:
  std::string name_;
  std::vector<size_t> input_shape_;  // per example, e.g. {1, 28, 28}
  std::vector<LayerPtr<T>> layers_;
};

struct ModelSpec {
  std::string name = "mlp";            // mlp | small_cnn | small_cnn_bn | medium_cnn
  std::vector<size_t> hidden = {128};  // mlp hidden sizes
  size_t kernel = 3;                   // medium_cnn kernel size X (1, 3, 5 or 7)
  double dropout = 0;                  // dropout before the last layer, if > 0
};

// mlp: flatten, [linear, relu] per hidden size, linear to 10.
// small_cnn (Zhuang et al., appendix C): 3 x [conv 3x3 (16, 32, 32 channels, padding 1), relu,
//   maxpool 2x2], dense 32, relu, dense 10; small_cnn_bn adds batchnorm after each conv.
// medium_cnn: 6 x [conv XxX (16, 32, 64, 128, 256, 512), batchnorm, relu, maxpool], global
//   average pooling, dense 10 (pools stop halving at 1 x 1 for 28 x 28 inputs).
// Throws fp::FormatError naming a bad spec.
template <class T>
Model<T> build_model(const ModelSpec& spec, const std::vector<size_t>& input_shape = {1, 28, 28}, size_t classes = 10);

}  // namespace fplab::models
