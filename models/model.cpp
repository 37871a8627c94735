#include "models/model.hpp"

#include "fp/format.hpp"
#include "models/batch_norm.hpp"
#include "models/conv2d.hpp"
#include "models/dropout.hpp"
#include "models/global_avg_pool.hpp"
#include "models/linear.hpp"
#include "models/max_pool.hpp"
#include "models/relu.hpp"

namespace fplab::models {

template <class T>
Tensor<T> Model<T>::forward(const Tensor<T>& x, Context& ctx) {
  Tensor<T> h = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    ctx.layer = i;
    h = layers_[i]->forward(h, ctx);
  }
  return h;
}

template <class T>
void Model<T>::backward(const Tensor<T>& dlogits, Context& ctx) {
  Tensor<T> g = dlogits;
  for (size_t i = layers_.size(); i-- > 0;) {
    ctx.layer = i;
    ctx.input_grad = i > 0;
    g = layers_[i]->backward(g, ctx);
  }
  ctx.input_grad = true;
}

template <class T>
void Model<T>::initialize(const Context& ctx) {
  Context c = ctx;
  for (size_t i = 0; i < layers_.size(); ++i) {
    c.layer = i;
    layers_[i]->initialize(c);
  }
}

template <class T>
std::vector<Parameter<T>*> Model<T>::parameters() {
  std::vector<Parameter<T>*> all;
  for (auto& l : layers_)
    for (auto* p : l->parameters()) all.push_back(p);
  return all;
}

template <class T>
std::vector<Tensor<T>*> Model<T>::buffers() {
  std::vector<Tensor<T>*> all;
  for (auto& l : layers_)
    for (auto* b : l->buffers()) all.push_back(b);
  return all;
}

template <class T>
size_t Model<T>::parameter_count() {
  size_t n = 0;
  for (auto* p : parameters()) n += p->value.size();
  return n;
}

template <class T>
std::string Model<T>::describe() const {
  std::string s = name_ + ":";
  for (const auto& l : layers_) s += " " + l->describe();
  return s;
}

template <class T>
Model<T> build_model(const ModelSpec& spec, const std::vector<size_t>& input_shape, size_t classes) {
  Model<T> m(spec.name, input_shape);
  std::vector<size_t> shape = {1};
  shape.insert(shape.end(), input_shape.begin(), input_shape.end());
  auto add = [&](LayerPtr<T> layer) {
    shape = layer->output_shape(shape);
    m.add(std::move(layer));
  };
  auto dense_head = [&](const std::vector<size_t>& hidden) {
    add(std::make_unique<Flatten<T>>());
    for (size_t h : hidden) {
      add(std::make_unique<Linear<T>>(shape[1], h));
      add(std::make_unique<ReLU<T>>());
    }
    if (spec.dropout > 0) add(std::make_unique<Dropout<T>>(spec.dropout));
    add(std::make_unique<Linear<T>>(shape[1], classes));
  };
  if (spec.dropout < 0 || spec.dropout >= 1) throw fp::FormatError("dropout must be in [0, 1)");
  if (spec.name == "mlp") {
    if (spec.hidden.empty()) throw fp::FormatError("mlp needs at least one hidden size (e.g. --hidden 128)");
    // A layer of width 0 would make the next GEMM's K zero: nothing to learn, and no caller means it.
    for (size_t h : spec.hidden)
      if (h == 0) throw fp::FormatError("mlp hidden sizes must be at least 1 (--hidden 0 makes a layer of width 0)");
    dense_head(spec.hidden);
  } else if (spec.name == "small_cnn" || spec.name == "small_cnn_bn") {
    for (size_t channels : {16, 32, 32}) {
      add(std::make_unique<Conv2d<T>>(shape[1], channels, 3, 1, 1));
      if (spec.name == "small_cnn_bn") add(std::make_unique<BatchNorm<T>>(channels));
      add(std::make_unique<ReLU<T>>());
      add(std::make_unique<MaxPool2d<T>>());
    }
    dense_head({32});
  } else if (spec.name == "medium_cnn") {
    if (spec.kernel % 2 == 0 || spec.kernel > 7) throw fp::FormatError("medium_cnn kernel must be 1, 3, 5 or 7");
    for (size_t channels : {16, 32, 64, 128, 256, 512}) {
      add(std::make_unique<Conv2d<T>>(shape[1], channels, spec.kernel, 1, spec.kernel / 2));
      add(std::make_unique<BatchNorm<T>>(channels));
      add(std::make_unique<ReLU<T>>());
      add(std::make_unique<MaxPool2d<T>>());
    }
    add(std::make_unique<GlobalAvgPool<T>>());
    shape = {1, shape[1]};
    add(std::make_unique<Linear<T>>(shape[1], classes));
  } else {
    throw fp::FormatError("unknown model '" + spec.name + "' (known: mlp, small_cnn, small_cnn_bn, medium_cnn)");
  }
  return m;
}

template class Model<float>;
template class Model<double>;
template Model<float> build_model<float>(const ModelSpec&, const std::vector<size_t>&, size_t);
template Model<double> build_model<double>(const ModelSpec&, const std::vector<size_t>&, size_t);

}  // namespace fplab::models
