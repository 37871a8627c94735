// fplab.matmul: C = A B for 2-D float32 arrays through the engine's GEMM (sim::gemm), every
// output's reduction over K in the schedule's order. The noise key's fields (impl seed, op id,
// call) are explicit, so that a caller replaying a training step (fplab.torch) can give every
// operation and call its own stream, as the C++ models do.
#include <string>

#include "python/src/bindings.hpp"
#include "sim/engine.hpp"

namespace fplab::python {
namespace {

FloatArray float32_matrix(py::handle object, const char* name) {
  if (!py::isinstance<py::array>(object))
    throw std::invalid_argument(std::string("matmul: ") + name + " must be a NumPy float32 array (got " +
                                std::string(py::str(py::type::of(object).attr("__name__"))) + ")");
  const auto x = py::reinterpret_borrow<py::array>(object);
  if (x.dtype().kind() != 'f' || x.dtype().itemsize() != 4)
    throw std::invalid_argument(std::string("matmul: ") + name + " must be a float32 array (got " +
                                std::string(py::str(x.dtype())) + "); convert it with .astype(numpy.float32)");
  if (x.ndim() != 2)
    throw std::invalid_argument(std::string("matmul: ") + name + " must be two-dimensional (got " +
                                std::to_string(x.ndim()) + " dimensions)");
  return FloatArray::ensure(x);  // the same array when C-contiguous, else a contiguous copy
}

py::array_t<float> matmul_arrays(py::handle a_in, py::handle b_in, const sim::Schedule& schedule,
                                 const sim::Arithmetic& arithmetic, uint64_t impl_seed, uint64_t op_id, uint64_t call,
                                 py::object out) {
  const FloatArray a = float32_matrix(a_in, "a"), b = float32_matrix(b_in, "b");
  const sim::GemmShape shape{static_cast<size_t>(a.shape(0)), static_cast<size_t>(b.shape(1)),
                             static_cast<size_t>(a.shape(1))};
  if (static_cast<size_t>(b.shape(0)) != shape.k)
    throw std::invalid_argument("matmul: shapes (" + std::to_string(shape.m) + ", " + std::to_string(shape.k) +
                                ") and (" + std::to_string(b.shape(0)) + ", " + std::to_string(shape.n) +
                                ") do not chain (a's columns must equal b's rows)");
  py::array_t<float> c = out.is_none()
                             ? py::array_t<float>({static_cast<py::ssize_t>(shape.m), static_cast<py::ssize_t>(shape.n)})
                             : output_array(out, "matmul", {shape.m, shape.n});
  const float *a_data = a.data(), *b_data = b.data();
  float* c_data = c.mutable_data();
  const auto overlaps = [&](const float* x, size_t size) {
    return size > 0 && x < c_data + shape.m * shape.n && c_data < x + size;
  };
  if (overlaps(a_data, shape.m * shape.k) || overlaps(b_data, shape.k * shape.n))
    throw std::invalid_argument("matmul: out must not share memory with a or b");
  {
    py::gil_scoped_release unlocked;
    sim::gemm(schedule, a_data, b_data, c_data, shape, arithmetic, {impl_seed, op_id, call});
  }
  return c;
}

}  // namespace

void bind_matmul(py::module_& m) {
  m.def("matmul", &matmul_arrays, py::arg("a"), py::arg("b"), py::arg("schedule"), py::arg("arithmetic"),
        py::arg("impl_seed") = 0, py::arg("op_id") = 0, py::arg("call") = 0, py::kw_only(), py::arg("out") = py::none(),
        "C = A B for 2-D float32 arrays (sim::gemm): output (i, j) is the dot product of row i and column j in the "
        "schedule's order, stored as float32 (into out, a C-contiguous float32 array of C's shape, when given).");
}

}  // namespace fplab::python
