// fplab._core.dot_planes: per channel the dot product of two float32 planes (B, C, P) over batch and
// positions, each a 1 x n by n x 1 sim::gemm with a noise key of its own: a batch norm's variance and
// gamma gradient in cuDNN's form (models/batch_norm.cpp, column_dots), in one call for every channel
// rather than one a channel from Python.
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "python/src/bindings.hpp"
#include "sim/channel_dots.hpp"

namespace fplab::python {

FloatArray float32_planes(py::handle object, const char* function, const char* name) {
  if (!py::isinstance<py::array>(object))
    throw std::invalid_argument(std::string(function) + ": " + name + " must be a NumPy float32 array");
  const auto array = py::reinterpret_borrow<py::array>(object);
  if (array.dtype().kind() != 'f' || array.dtype().itemsize() != 4 || array.ndim() != 3)
    throw std::invalid_argument(std::string(function) + ": " + name +
                                " must be a 3-D float32 array (batch, channels, positions)");
  return FloatArray::ensure(array);
}

namespace {

// Per channel c the dot product of a[:, c, :] and b[:, c, :] (B, C, P), terms in the order b·P + p,
// keyed {impl_seed, op_ids[c], call}: sim::channel_dots, as models/batch_norm.cpp's column_dots.
py::array_t<float> dot_planes_array(py::handle a_in, py::handle b_in, const sim::Schedule& schedule,
                                    const sim::Arithmetic& arithmetic, uint64_t impl_seed,
                                    const std::vector<uint64_t>& op_ids, uint64_t call) {
  const FloatArray a = float32_planes(a_in, "dot_planes", "a"), b = float32_planes(b_in, "dot_planes", "b");
  for (int d = 0; d < 3; ++d)
    if (a.shape(d) != b.shape(d)) throw std::invalid_argument("dot_planes: a and b must have the same shape");
  const auto batch = static_cast<size_t>(a.shape(0)), channels = static_cast<size_t>(a.shape(1));
  const auto positions = static_cast<size_t>(a.shape(2));
  if (op_ids.size() != channels)
    throw std::invalid_argument("dot_planes: op_ids must give one op id per channel (" + std::to_string(channels) +
                                "), got " + std::to_string(op_ids.size()));
  py::array_t<float> out(static_cast<py::ssize_t>(channels));
  std::vector<sim::NoiseKey> keys;
  for (const uint64_t op_id : op_ids) keys.push_back({impl_seed, op_id, call});
  const float *a_data = a.data(), *b_data = b.data();
  float* out_data = out.mutable_data();
  {
    py::gil_scoped_release unlocked;
    sim::channel_dots(schedule, arithmetic, a_data, b_data, {batch, channels, positions}, keys, out_data);
  }
  return out;
}

}  // namespace

void bind_dot_planes(py::module_& m) {
  m.def("dot_planes", &dot_planes_array, py::arg("a"), py::arg("b"), py::arg("schedule"), py::arg("arithmetic"),
        py::arg("impl_seed"), py::arg("op_ids"), py::arg("call"),
        "Per channel c the dot product of the float32 planes a[:, c, :] and b[:, c, :] (B, C, P), terms in the order "
        "b*P + p, as a 1 x n by n x 1 matmul keyed op_ids[c] (the products as arithmetic says): float32 (C,).");
}

}  // namespace fplab::python
