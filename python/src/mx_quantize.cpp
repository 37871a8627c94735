// fplab.mx_quantize: OCP MX block scaling (fp/mx_block.hpp) of an array, in blocks of `block`
// along its last axis (a matrix's rows; pass a transpose for columns), without the GIL. Stochastic
// rounding gives row r (every index but the last) its own Philox sub-stream r of the key `seed`,
// drawn in element order: a row's result depends only on (seed, r, the row).
#include <algorithm>
#include <span>
#include <tuple>
#include <vector>

#include "fp/counter_rng.hpp"
#include "fp/format.hpp"
#include "fp/mx_block.hpp"
#include "python/src/bindings.hpp"

namespace fplab::python {
namespace {

std::tuple<py::array_t<uint8_t>, py::array_t<double>, py::array_t<double>> mx_quantize_array(
    py::handle x, std::string_view format_text, size_t block, std::string_view mode_text, uint64_t seed) {
  const fp::Format element = fp::parse_format(format_text);
  const fp::Mode mode = fp::parse_mode(mode_text);
  fp::CounterRng checked(seed);
  fp::mx_quantize({}, element, block, mode, &checked);  // the arguments' checks, for an empty x too
  const DoubleArray in = double_array(x, "mx_quantize", "x", false);
  std::vector<py::ssize_t> shape(in.shape(), in.shape() + in.ndim());
  if (shape.empty()) shape.push_back(1);  // a scalar is a block of one
  const auto n = static_cast<size_t>(shape.back());
  const size_t rows = n == 0 ? 0 : static_cast<size_t>(in.size()) / n;
  const size_t blocks = (n + block - 1) / block;
  std::vector<py::ssize_t> scale_shape = shape;
  scale_shape.back() = static_cast<py::ssize_t>(blocks);
  py::array_t<uint8_t> scales(scale_shape);
  py::array_t<double> elements(shape), dequantized(shape);
  const double* from = in.data();
  uint8_t* scale_out = scales.mutable_data();
  double *element_out = elements.mutable_data(), *value_out = dequantized.mutable_data();
  {
    py::gil_scoped_release unlocked;
    for (size_t r = 0; r < rows; ++r) {
      fp::CounterRng stream(seed, r);
      const fp::MxBlocks q = fp::mx_quantize(std::span(from + r * n, n), element, block, mode, &stream);
      std::copy(q.scale_bits.begin(), q.scale_bits.end(), scale_out + r * blocks);
      std::copy(q.elements.begin(), q.elements.end(), element_out + r * n);
      std::copy(q.dequantized.begin(), q.dequantized.end(), value_out + r * n);
    }
  }
  return {scales, elements, dequantized};
}

}  // namespace

void bind_mx_quantize(py::module_& m) {
  m.def("mx_quantize", &mx_quantize_array, py::arg("x"), py::arg("element_format"), py::arg("block") = 32,
        py::arg("mode") = "rne", py::arg("seed") = 0,
        "OCP MX blocks along x's last axis: (e8m0 scale bits, element values, dequantized values).");
}

}  // namespace fplab::python
