// NumPy arrays in: the caller's array itself where it is already C-contiguous float64 (no copy),
// a converted copy otherwise, and one-line errors for what is not an array of numbers.
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

}  // namespace fplab::python
