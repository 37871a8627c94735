// fplab.Arithmetic: how a reduction's additions round (sim/arithmetic.hpp), apart from their
// order: the accumulation format, the rounding mode, how products enter, flushing, saturation.
#include <string>

#include "fp/format.hpp"
#include "fp/rounding.hpp"
#include "python/src/bindings.hpp"
#include "sim/arithmetic.hpp"

namespace fplab::python {

void bind_arithmetic(py::module_& m) {
  py::class_<sim::Arithmetic>(m, "Arithmetic",
                              "The arithmetic of a reduction: format, rounding mode, products (fused, rounded, exact), "
                              "subnormal flushing and saturation.")
      .def(py::init([](std::string_view format, std::string_view mode, std::string_view products, bool flush_subnormals,
                       bool saturate, int sr_bits) {
             sim::Arithmetic a{fp::parse_format(format), fp::parse_mode(mode), flush_subnormals, saturate,
                               sim::parse_products(products)};
             if (sr_bits < 1 || sr_bits > 64)
               throw fp::FormatError("sr_bits must be 1..64, got " + std::to_string(sr_bits));
             if (sr_bits != 64 && a.mode != fp::Mode::sr)
               throw fp::FormatError("sr_bits=" + std::to_string(sr_bits) + " needs mode='sr'");
             a.sr_bits = sr_bits;
             return a;
           }),
           py::arg("format") = "fp32", py::arg("mode") = "rne", py::arg("products") = "fused", py::kw_only(),
           py::arg("flush_subnormals") = false, py::arg("saturate") = false, py::arg("sr_bits") = 64,
           "Formats and modes as in docs/formats-and-rounding.md; fplab.Error for an unknown one. sr_bits: random "
           "bits per stochastic rounding (1..64).")
      .def_property_readonly(
          "format", [](const sim::Arithmetic& a) { return a.format.name; }, "The format's canonical name.")
      .def_property_readonly(
          "mode", [](const sim::Arithmetic& a) { return std::string(fp::mode_name(a.mode)); }, "rne, rna, rz, ...")
      .def_property_readonly(
          "products", [](const sim::Arithmetic& a) { return std::string(sim::products_name(a.products)); },
          "fused, rounded or exact")
      .def_readonly("flush_subnormals", &sim::Arithmetic::flush_subnormals)
      .def_readonly("saturate", &sim::Arithmetic::saturate)
      .def_readonly("sr_bits", &sim::Arithmetic::sr_bits)
      .def_property_readonly("text", &sim::Arithmetic::to_string, "As the command line prints it: 'fp32/rne/fused'.")
      .def("__str__", &sim::Arithmetic::to_string)
      .def("__repr__", [](const sim::Arithmetic& a) {
        std::string text = "Arithmetic('" + a.format.name + "', '" + std::string(fp::mode_name(a.mode)) + "', '" +
                           std::string(sim::products_name(a.products)) + "'";
        if (a.flush_subnormals) text += ", flush_subnormals=True";
        if (a.saturate) text += ", saturate=True";
        if (a.sr_bits != 64) text += ", sr_bits=" + std::to_string(a.sr_bits);
        return text + ")";
      });
}

}  // namespace fplab::python
