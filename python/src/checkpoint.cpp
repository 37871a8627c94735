// fplab._core.read_checkpoint: the named arrays of a file `fplab train` wrote (--save-weights FILE:
// 'parameters', 'buffers', 'test_predictions'; --checkpoint FILE: the training state), through
// models/checkpoint_io.hpp, so that its integrity check (size, SHA-256) holds here too.
#include <string>

#include "models/checkpoint_io.hpp"
#include "python/src/bindings.hpp"

namespace fplab::python {
namespace {

template <class T>
py::array_t<T> copy_out(std::span<const T> values) {
  py::array_t<T> out(static_cast<py::ssize_t>(values.size()));
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

py::dict read_checkpoint(const std::string& path) {
  const auto r = [&] {
    py::gil_scoped_release unlocked;
    return models::CheckpointReader::read(path);
  }();
  py::dict arrays;
  for (const auto& name : r.names()) {
    // The reader answers by type: ask for each in turn (the names are few).
    try {
      arrays[py::str(name)] = copy_out(r.f32(name));
      continue;
    } catch (const models::DataError&) {
    }
    try {
      arrays[py::str(name)] = copy_out(r.f64(name));
      continue;
    } catch (const models::DataError&) {
    }
    arrays[py::str(name)] = copy_out(r.u64(name));
  }
  return arrays;
}

}  // namespace

void bind_checkpoint(py::module_& m) {
  m.def("read_checkpoint", &read_checkpoint, py::arg("path"),
        "The named arrays of an fplab checkpoint or --save-weights file (models/checkpoint_io.hpp), in file order: "
        "{name: float32, float64 or uint64 array}. A truncated or altered file is an fplab.Error.");
}

}  // namespace fplab::python
