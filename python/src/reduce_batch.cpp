// fplab._core.reduce_batch: many reductions sharing one order (sim::reduce_batch), the sums over a
// batch that training takes (bias gradients, BatchNorm statistics, softmax denominators, the mean
// loss). terms is (k, outputs): output m reduces column m, term t being terms[t, m], exactly the
// layout of models/compute.cpp's sum_rows, so that fplab.torch keys and orders line up with the C++
// training. The noise key's fields (impl seed, op id, call) are explicit, as for matmul.
#include <memory>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "python/src/bindings.hpp"
#include "python/src/transpose.hpp"
#include "sim/engine.hpp"

namespace fplab::python {
namespace {

py::array_t<double> reduce_batch_array(py::handle terms_in, const sim::Schedule& schedule,
                                       const sim::Arithmetic& arithmetic, uint64_t impl_seed, uint64_t op_id,
                                       uint64_t call) {
  const DoubleArray terms = double_array(terms_in, "reduce_batch", "terms", false);
  if (terms.ndim() != 2)
    throw std::invalid_argument("reduce_batch: terms must be two-dimensional, (terms per output, outputs) (got " +
                                std::to_string(terms.ndim()) + " dimensions)");
  const auto k = static_cast<size_t>(terms.shape(0)), outputs = static_cast<size_t>(terms.shape(1));
  py::array_t<double> out(static_cast<py::ssize_t>(outputs));
  const double* data = terms.data();
  double* out_data = out.mutable_data();
  {
    py::gil_scoped_release unlocked;
    sim::reduce_batch(schedule, data, k, outputs, arithmetic, {impl_seed, op_id, call}, out_data);
  }
  return out;
}

// The same for float32 planes x (B, C, P), output c reducing the B·P terms x[b, c, p] in the order
// t = b·P + p: the terms (B·P, C) of the rows (b, p) x channels that models/batch_norm.cpp sums,
// gathered and widened to double here (exactly) instead of a transposed copy and a conversion in
// the caller.
py::array_t<double> reduce_planes_array(py::handle x_in, const sim::Schedule& schedule,
                                        const sim::Arithmetic& arithmetic, uint64_t impl_seed, uint64_t op_id,
                                        uint64_t call) {
  if (!py::isinstance<py::array>(x_in))
    throw std::invalid_argument("reduce_planes: x must be a NumPy float32 array");
  const auto array = py::reinterpret_borrow<py::array>(x_in);
  if (array.dtype().kind() != 'f' || array.dtype().itemsize() != 4 || array.ndim() != 3)
    throw std::invalid_argument("reduce_planes: x must be a 3-D float32 array (batch, channels, positions)");
  const FloatArray x = FloatArray::ensure(array);
  const auto batch = static_cast<size_t>(x.shape(0)), channels = static_cast<size_t>(x.shape(1));
  const auto positions = static_cast<size_t>(x.shape(2));
  py::array_t<double> out(static_cast<py::ssize_t>(channels));
  const float* data = x.data();
  double* out_data = out.mutable_data();
  {
    py::gil_scoped_release unlocked;
    // Not value-initialised: every element is written below.
    const std::unique_ptr<double[]> terms(new double[batch * positions * channels]);
    for (size_t b = 0; b < batch; ++b)  // every batch's (channels x positions) matrix transposed
      transpose_into(data + b * channels * positions, terms.get() + b * positions * channels, channels, positions);
    sim::reduce_batch(schedule, terms.get(), batch * positions, channels, arithmetic, {impl_seed, op_id, call},
                      out_data);
  }
  return out;
}

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

void bind_reduce_batch(py::module_& m) {
  m.def("reduce_batch", &reduce_batch_array, py::arg("terms"), py::arg("schedule"), py::arg("arithmetic"),
        py::arg("impl_seed") = 0, py::arg("op_id") = 0, py::arg("call") = 0,
        "The columns of the 2-D array terms (k, outputs) each reduced along axis 0 in the schedule's order "
        "(sim::reduce_batch), as float64; outputs share one order, atomic and shuffle steps drawing per tile of 64.");
  m.def("reduce_planes", &reduce_planes_array, py::arg("x"), py::arg("schedule"), py::arg("arithmetic"),
        py::arg("impl_seed") = 0, py::arg("op_id") = 0, py::arg("call") = 0,
        "reduce_batch of the float32 planes x (B, C, P) seen as terms (B*P, C): output c sums x[b, c, p] in the order "
        "b*P + p (a batch norm's statistics over batch and positions), without a transposed copy.");
  m.def("dot_planes", &dot_planes_array, py::arg("a"), py::arg("b"), py::arg("schedule"), py::arg("arithmetic"),
        py::arg("impl_seed"), py::arg("op_ids"), py::arg("call"),
        "Per channel c the dot product of the float32 planes a[:, c, :] and b[:, c, :] (B, C, P), terms in the order "
        "b*P + p, as a 1 x n by n x 1 matmul keyed op_ids[c] (the products as arithmetic says): float32 (C,).");
}

}  // namespace fplab::python
