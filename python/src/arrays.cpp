// NumPy arrays in: the caller's array itself where it is already C-contiguous float64 (no copy),
// a converted copy otherwise, and one-line errors for what is not an array of numbers; and out:
// a caller's array that a result is written into.
#include <initializer_list>
#include <string>

#include "python/src/bindings.hpp"

namespace fplab::python {

DoubleArray double_array(py::handle x, std::string_view function, std::string_view name, bool one_dimensional) {
  const std::string where = std::string(function) + ": " + std::string(name);
  // ensure() returns the same object for a C-contiguous float64 array; on failure it clears the
  // Python error and returns a null array.
  DoubleArray array = DoubleArray::ensure(x);
  if (!array) throw std::invalid_argument(where + " must be an array of numbers");
  if (one_dimensional && array.ndim() != 1)
    throw std::invalid_argument(where + " must be one-dimensional (got " + std::to_string(array.ndim()) +
                                " dimensions)");
  return array;
}

py::array_t<float> output_array(py::handle out, std::string_view function, std::initializer_list<size_t> shape) {
  const std::string where = std::string(function) + ": out";
  if (!py::isinstance<py::array_t<float>>(out))
    throw std::invalid_argument(where + " must be a NumPy float32 array");
  auto array = py::reinterpret_borrow<py::array_t<float>>(out);
  bool fits = array.ndim() == static_cast<py::ssize_t>(shape.size()) && array.writeable() &&
              (array.flags() & py::array::c_style) != 0;
  py::ssize_t d = 0;
  if (fits)
    for (const size_t extent : shape) fits = fits && static_cast<size_t>(array.shape(d++)) == extent;
  if (!fits) throw std::invalid_argument(where + " must be a writeable C-contiguous array of the result's shape");
  return array;
}

}  // namespace fplab::python
