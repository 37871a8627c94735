// fplab._core.Dataset: an image-classification data set as `fplab train` reads it
// (models/dataset.hpp): the images normalised once, (x/255 - mean) / std rounded to float32, with
// mean and std from the training pixels, and the batches the trainer makes of them
// (models/augment.hpp make_batch: the same crops and flips). A PyTorch script that reproduces a
// `fplab train` run takes its tensors from here rather than normalising again itself (another
// formula rounds differently).
//
// The arrays are read-only views of the C++ vectors (no copy); each keeps its Dataset alive.
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "models/augment.hpp"
#include "models/dataset.hpp"
#include "python/src/bindings.hpp"

namespace fplab::python {
namespace {

using Dataset = std::shared_ptr<models::Dataset>;

// A read-only view of `data` shaped `shape`, owned by `base`.
template <class T>
py::array read_only(std::vector<py::ssize_t> shape, const T* data, py::handle base) {
  py::array_t<T> view(std::move(shape), data, base);
  view.attr("setflags")(py::arg("write") = false);
  return view;
}

const models::ImageSet& split(const models::Dataset& d, const std::string& name) {
  if (name == "train") return d.train;
  if (name == "test") return d.test;
  throw std::invalid_argument("Dataset: split must be 'train' or 'test' (got '" + name + "')");
}

py::array images(py::object self, const std::string& name) {
  const auto& set = split(*self.cast<Dataset>(), name);
  return read_only<float>({static_cast<py::ssize_t>(set.size()), set.channels, set.rows, set.cols}, set.images.data(),
                          self);
}

py::array labels(py::object self, const std::string& name) {
  const auto& set = split(*self.cast<Dataset>(), name);
  return read_only<uint8_t>({static_cast<py::ssize_t>(set.size())}, set.labels.data(), self);
}

// The batch of training examples `examples` (indices into the training split) as train() makes
// it: images (n, C, H, W) float32 and labels (n,) uint8.
py::tuple batch(const Dataset& d, const std::vector<size_t>& examples, uint64_t epoch, uint64_t algo_seed,
                int augment_pad, bool flip) {
  if (augment_pad < 0) throw std::invalid_argument("Dataset.batch: augment_pad must be 0 or more");
  const models::ImageSet& set = d->train;
  for (size_t e : examples)
    if (e >= set.size())
      throw std::invalid_argument("Dataset.batch: example " + std::to_string(e) + " is not in the training split (" +
                                  std::to_string(set.size()) + " examples)");
  const auto n = static_cast<py::ssize_t>(examples.size());
  py::array_t<float> x({n, static_cast<py::ssize_t>(set.channels), static_cast<py::ssize_t>(set.rows),
                        static_cast<py::ssize_t>(set.cols)});
  py::array_t<uint8_t> y(n);
  float* x_data = x.mutable_data();
  uint8_t* y_data = y.mutable_data();
  {
    py::gil_scoped_release unlocked;
    models::make_batch(set, examples, {augment_pad, flip}, algo_seed, epoch, d->background(), x_data, y_data);
  }
  return py::make_tuple(x, y);
}

Dataset load_fashion_mnist(const std::string& dir) {
  py::gil_scoped_release unlocked;
  return std::make_shared<models::Dataset>(models::load_fashion_mnist(dir));
}

Dataset load_image_dataset(const std::string& dir) {
  py::gil_scoped_release unlocked;
  return std::make_shared<models::Dataset>(models::load_image_dataset(dir));
}

Dataset load_idx(const std::string& train_images, const std::string& train_labels, const std::string& test_images,
                 const std::string& test_labels) {
  py::gil_scoped_release unlocked;
  return std::make_shared<models::Dataset>(
      models::load_idx_dataset({train_images, train_labels, test_images, test_labels}));
}

}  // namespace

void bind_dataset(py::module_& m) {
  py::class_<models::Dataset, Dataset>(m, "Dataset",
                                       "An image-classification data set as fplab train reads it (models/dataset.hpp).")
      .def("images", &images, py::arg("split") = "train",
           "The normalised images of 'train' or 'test', (N, C, H, W) float32, read-only (no copy).")
      .def("labels", &labels, py::arg("split") = "train", "The labels of 'train' or 'test', (N,) uint8, read-only.")
      .def("batch", &batch, py::arg("examples"), py::arg("epoch") = 0, py::arg("algo_seed") = 1,
           py::arg("augment_pad") = 0, py::arg("flip") = false,
           "The training examples `examples` as one batch, as fplab train makes it (models::make_batch: crops and "
           "flips drawn from (algo_seed, epoch, example)): (images (n, C, H, W) float32, labels (n,) uint8).")
      .def_property_readonly(
          "mean", [](const Dataset& d) { return d->normalisation.mean; },
          "Mean of the training pixels scaled to [0, 1].")
      .def_property_readonly(
          "std", [](const Dataset& d) { return d->normalisation.std; },
          "Standard deviation of the training pixels scaled to [0, 1].")
      .def_property_readonly(
          "background", [](const Dataset& d) { return d->background(); },
          "The normalised value of a black pixel (a random crop's padding).")
      .def_property_readonly("class_names", [](const Dataset& d) { return d->class_names; })
      .def_property_readonly(
          "classes", [](const Dataset& d) { return d->train.classes; }, "The number of classes (the model's outputs).")
      .def("__repr__", [](const Dataset& d) {
        return "<fplab Dataset: " + std::to_string(d->train.size()) + " training and " +
               std::to_string(d->test.size()) + " test images of " + std::to_string(d->train.channels) + "x" +
               std::to_string(d->train.rows) + "x" + std::to_string(d->train.cols) + ">";
      });
  m.def("load_fashion_mnist", &load_fashion_mnist, py::arg("dir") = std::string(models::kFashionMnistDir),
        "Fashion-MNIST from the four IDX files in `dir` (models::load_fashion_mnist), as fplab train loads it.");
  m.def("load_image_dataset", &load_image_dataset, py::arg("dir") = std::string(models::kFashionMnistDir),
        "The data set in folder `dir` as fplab train --data-dir reads it (models::load_image_dataset: the four "
        "standard IDX names, gzipped or not, classes.txt optional).");
  m.def("load_idx_dataset", &load_idx, py::arg("train_images"), py::arg("train_labels"), py::arg("test_images"),
        py::arg("test_labels"), "Any IDX image/label pair of files (models::load_idx_dataset).");
}

}  // namespace fplab::python
