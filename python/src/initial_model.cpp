// fplab._core.initial_model: the layers of one of fplab's models (models/model.cpp build_model)
// with the initial weights `fplab train` starts from (models/trainer.hpp initial_model: the
// algorithmic seed's draws, plus the one-bit flip of flip_weight), in fplab's layout: a Linear
// weight (in, out), a Conv2d weight (C*kh*kw, C_out) with rows ordered (c, i, j). The layer index
// is the one the C++ model gives the layer (Context::layer): the first field of every noise key
// of its reductions, and of its dropout masks.
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "models/trainer.hpp"
#include "python/src/bindings.hpp"

namespace fplab::python {
namespace {

py::array_t<float> copy_out(const models::Tensor<float>& t) {
  std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
  py::array_t<float> out(shape);
  std::copy(t.data.begin(), t.data.end(), out.mutable_data());
  return out;
}

py::list initial_model(const std::string& name, const std::vector<size_t>& hidden, size_t kernel, double dropout,
                       uint64_t algo_seed, const std::vector<int>& input_shape, size_t classes, int64_t flip_weight) {
  if (input_shape.size() != 3 || input_shape[0] < 1 || input_shape[1] < 1 || input_shape[2] < 1)
    throw std::invalid_argument("initial_model: input_shape must be (channels, rows, cols), each at least 1");
  models::TrainConfig config;
  config.model = {name, hidden, kernel, dropout};
  config.algo_seed = algo_seed;
  config.flip_weight = flip_weight;
  models::ImageSet shape;  // only its shape reaches the model
  shape.channels = input_shape[0];
  shape.rows = input_shape[1];
  shape.cols = input_shape[2];
  if (classes < 2 || classes > 256) throw std::invalid_argument("initial_model: classes must be 2 to 256");
  shape.classes = classes;
  models::Model<float> model = models::initial_model(config, shape);
  py::list layers;
  for (size_t i = 0; i < model.layer_count(); ++i) {
    models::Layer<float>& layer = model.layer(i);
    py::list parameters, buffers;
    for (auto* p : layer.parameters())
      parameters.append(py::dict(py::arg("name") = p->name, py::arg("value") = copy_out(p->value),
                                 py::arg("weight_decay") = p->weight_decay));
    for (auto* b : layer.buffers()) buffers.append(copy_out(*b));
    layers.append(py::dict(py::arg("index") = i, py::arg("layer") = layer.describe(),
                           py::arg("parameters") = parameters, py::arg("buffers") = buffers));
  }
  return layers;
}

}  // namespace

void bind_initial_model(py::module_& m) {
  m.def("initial_model", &initial_model, py::arg("model") = "mlp", py::arg("hidden") = std::vector<size_t>{128},
        py::arg("kernel") = 3, py::arg("dropout") = 0.0, py::arg("algo_seed") = 1,
        py::arg("input_shape") = std::vector<int>{1, 28, 28}, py::arg("classes") = 10, py::arg("flip_weight") = -1,
        "The layers of fplab's model `model` (mlp, small_cnn, small_cnn_bn, medium_cnn) with the initial weights "
        "fplab train starts from (`classes` outputs: a data set's Dataset.classes): a list of {'index', 'layer' (its description, e.g. 'linear(784->128)'), "
        "'parameters': [{'name', 'value' (fplab's layout, float32), 'weight_decay'}], 'buffers': [float32 arrays]}.");
}

}  // namespace fplab::python
