// fplab._core.dot_planes: per channel the dot product of two float32 planes (B, C, P) over batch and
// positions, each a 1 x n by n x 1 sim::gemm with a noise key of its own: a batch norm's variance and
// gamma gradient in cuDNN's form (models/batch_norm.cpp, column_dots), in one call for every channel
// rather than one a channel from Python.
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "python/src/bindings.hpp"
#include "sim/engine.hpp"

namespace fplab::python {
namespace {

FloatArray float32_planes(py::handle object, const char* name) {
  if (!py::isinstance<py::array>(object))
    throw std::invalid_argument(std::string("dot_planes: ") + name + " must be a NumPy float32 array");
  const auto array = py::reinterpret_borrow<py::array>(object);
  if (array.dtype().kind() != 'f' || array.dtype().itemsize() != 4 || array.ndim() != 3)
    throw std::invalid_argument(std::string("dot_planes: ") + name +
                                " must be a 3-D float32 array (batch, channels, positions)");
  return FloatArray::ensure(array);
}

// Per channel c the dot product of a[:, c, :] and b[:, c, :] (B, C, P), terms in the order b·P + p,
// each a 1 x (B·P) by (B·P) x 1 sim::gemm keyed {impl_seed, op_ids[c], call}: what models/
// batch_norm.cpp's column_dots computes in cuDNN's form (the products fused into the schedule's
// chains where its arithmetic says), in one call rather than one a channel.
py::array_t<float> dot_planes_array(py::handle a_in, py::handle b_in, const sim::Schedule& schedule,
                                    const sim::Arithmetic& arithmetic, uint64_t impl_seed,
                                    const std::vector<uint64_t>& op_ids, uint64_t call) {
  const FloatArray a = float32_planes(a_in, "a"), b = float32_planes(b_in, "b");
  for (int d = 0; d < 3; ++d)
    if (a.shape(d) != b.shape(d)) throw std::invalid_argument("dot_planes: a and b must have the same shape");
  const auto batch = static_cast<size_t>(a.shape(0)), channels = static_cast<size_t>(a.shape(1));
  const auto positions = static_cast<size_t>(a.shape(2)), n = batch * positions;
  if (op_ids.size() != channels)
    throw std::invalid_argument("dot_planes: op_ids must give one op id per channel (" + std::to_string(channels) +
                                "), got " + std::to_string(op_ids.size()));
  py::array_t<float> out(static_cast<py::ssize_t>(channels));
  const float *a_data = a.data(), *b_data = b.data();
  float* out_data = out.mutable_data();
  {
    py::gil_scoped_release unlocked;
    std::vector<float> ac(n), bc(n);
    for (size_t c = 0; c < channels; ++c) {
      for (size_t i = 0; i < batch; ++i)
        for (size_t p = 0; p < positions; ++p) {
          ac[i * positions + p] = a_data[(i * channels + c) * positions + p];
          bc[i * positions + p] = b_data[(i * channels + c) * positions + p];
        }
      sim::gemm(schedule, ac.data(), bc.data(), out_data + c, {1, 1, n}, arithmetic, {impl_seed, op_ids[c], call});
    }
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
