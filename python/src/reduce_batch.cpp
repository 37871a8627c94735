// fplab._core.reduce_batch: many reductions sharing one order (sim::reduce_batch), the sums over a
// batch that training takes (bias gradients, BatchNorm statistics, softmax denominators, the mean
// loss). terms is (k, outputs): output m reduces column m, term t being terms[t, m], exactly the
// layout of models/compute.cpp's sum_rows, so that fplab.torch keys and orders line up with the C++
// training. The noise key's fields (impl seed, op id, call) are explicit, as for matmul.
#include <memory>
#include <string>

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
}

}  // namespace fplab::python
