// fplab._core.training_examples, epoch_order and dropout_mask: the algorithmic noise of a `fplab
// train` run (models/algo_noise.hpp) drawn by the same C++ code, so that a PyTorch script trains on
// the same examples in the same order with the same dropout masks. Each is a pure function of the
// algorithmic seed and its coordinates (epoch, layer, step).
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "models/algo_noise.hpp"
#include "python/src/bindings.hpp"

namespace fplab::python {
namespace {

py::array_t<int64_t> as_int64(const std::vector<size_t>& v) {
  py::array_t<int64_t> out(static_cast<py::ssize_t>(v.size()));
  int64_t* data = out.mutable_data();
  for (size_t i = 0; i < v.size(); ++i) data[i] = static_cast<int64_t>(v[i]);
  return out;
}

py::array_t<int64_t> training_examples(py::array_t<uint8_t, py::array::c_style | py::array::forcecast> labels,
                                       size_t subset, int imbalance_class, double imbalance_percent, uint64_t seed) {
  if (labels.ndim() != 1) throw std::invalid_argument("training_examples: labels must be one-dimensional");
  models::TrainSelection selection{subset, imbalance_class, imbalance_percent};
  return as_int64(
      models::select_training_examples({labels.data(), static_cast<size_t>(labels.shape(0))}, selection, seed));
}

py::array_t<bool> dropout_mask(uint64_t seed, uint64_t layer, uint64_t step, double p_drop, size_t count) {
  std::vector<uint8_t> keep(count);
  models::dropout_mask(seed, layer, step, p_drop, keep);
  py::array_t<bool> out(static_cast<py::ssize_t>(count));
  bool* data = out.mutable_data();
  for (size_t i = 0; i < count; ++i) data[i] = keep[i] != 0;
  return out;
}

}  // namespace

void bind_algo_noise(py::module_& m) {
  m.def("training_examples", &training_examples, py::arg("labels"), py::arg("subset") = 0,
        py::arg("imbalance_class") = -1, py::arg("imbalance_percent") = 100.0, py::arg("seed") = 1,
        "The training examples fplab train selects (models::select_training_examples): a stratified subset of "
        "`subset` examples (0: all), optionally one class cut to a percentage; indices into the training split, "
        "ascending, int64.");
  m.def(
      "epoch_order",
      [](size_t count, uint64_t seed, uint64_t epoch) { return as_int64(models::epoch_order(count, seed, epoch)); },
      py::arg("count"), py::arg("seed"), py::arg("epoch"),
      "The order of epoch `epoch` (models::epoch_order): a permutation of 0..count-1, positions in the selected "
      "examples; batch b of the epoch is positions b*batch ... (b+1)*batch - 1 of it.");
  m.def("dropout_mask", &dropout_mask, py::arg("seed"), py::arg("layer"), py::arg("step"), py::arg("p_drop"),
        py::arg("count"),
        "Which of `count` activations a Dropout layer at index `layer` keeps at training step `step` "
        "(models::dropout_mask), a bool array; kept ones are scaled by float32(1 / (1 - p_drop)).");
}

}  // namespace fplab::python
