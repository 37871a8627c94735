// fplab.profiles and fplab.profile: the hardware profiles (profiles/hw_profile.hpp,
// docs/profiles.md), found by name along the same search path as the command line's
// (profiles_dir folders, $FPLAB_HW_PROFILES, the shipped ones) or read from a .toml path.
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "profiles/hw_profile.hpp"
#include "python/src/bindings.hpp"
#include "sim/schedule.hpp"

namespace fplab::python {
namespace {

// {"fwd": OpChoice, "dgrad": ..., ...} in the order of profiles::all_op_kinds.
py::dict op_choices(const profiles::OpTable& table) {
  py::dict ops;
  for (const profiles::OpKind kind : profiles::all_op_kinds) ops[py::str(profiles::op_kind_name(kind))] = table[kind];
  return ops;
}

// The keyword arguments of fplab.reduce, dot and matmul that this choice stands for.
py::dict call_arguments(const profiles::OpChoice& choice) {
  const sim::Arithmetic& a = choice.arithmetic;
  return py::dict(py::arg("schedule") = choice.schedule, py::arg("format") = a.format.name,
                  py::arg("mode") = std::string(fp::mode_name(a.mode)),
                  py::arg("products") = std::string(sim::products_name(a.products)),
                  py::arg("flush_subnormals") = a.flush_subnormals, py::arg("saturate") = a.saturate,
                  py::arg("sr_bits") = a.sr_bits);
}

}  // namespace

void bind_profiles(py::module_& m) {
  py::class_<profiles::OpChoice>(m, "OpChoice", "One operation kind's schedule and arithmetic in a profile's table.")
      .def_readonly("schedule", &profiles::OpChoice::schedule)
      .def_readonly("arithmetic", &profiles::OpChoice::arithmetic)
      .def_property_readonly("nondeterministic", &profiles::draws_noise,
                             "True if it draws implementation noise (atomic, shuffle, stochastic rounding).")
      .def("arguments", &call_arguments,
           "The keyword arguments of fplab.reduce, dot and matmul for this choice: fplab.matmul(a, b, "
           "**op.arguments()).")
      .def("__repr__", [](const profiles::OpChoice& c) {
        return "OpChoice(" + std::string(py::repr(py::str(sim::to_string(c.schedule)))) + ", '" +
               c.arithmetic.to_string() + "')";
      });

  py::class_<profiles::LayerRule>(m, "LayerRule",
                                  "A profile's exception for some layers: which layers (match) and what their "
                                  "fwd/dgrad/wgrad/bias_grad use there (ops).")
      .def_property_readonly("match", [](const profiles::LayerRule& r) { return r.match.describe(); })
      .def_property_readonly(
          "ops",
          [](const profiles::LayerRule& r) {
            py::dict ops;
            for (const profiles::OpKind kind : profiles::all_op_kinds)
              if (const auto& c = r.ops[static_cast<size_t>(kind)]) ops[py::str(profiles::op_kind_name(kind))] = *c;
            return ops;
          },
          "{op kind: OpChoice} for the kinds it sets.")
      .def_property_readonly(
          "conv_wgrad",
          [](const profiles::LayerRule& r) -> std::optional<std::string> {
            if (!r.conv_wgrad) return std::nullopt;
            return std::string(profiles::conv_wgrad_name(*r.conv_wgrad));
          },
          "How a convolution's weight gradient is computed in these layers: 'winograd' (cuDNN's F(4x4, 3x3) "
          "transforms, wgrad ordering the 36 sums), 'gemm', or None where the rule does not say.")
      .def_property_readonly(
          "batch_norm",
          [](const profiles::LayerRule& r) -> std::optional<std::string> {
            if (!r.batch_norm) return std::nullopt;
            return std::string(profiles::batch_norm_form_name(*r.batch_norm));
          },
          "A batch norm's arithmetic in training in these layers: 'cudnn' (cuDNN's singleread kernels' formulas), "
          "'fplab', or None where the rule does not say.")
      .def(
          "matches",
          [](const profiles::LayerRule& r, const std::string& layer, size_t in, size_t out, size_t kernel,
             size_t stride, size_t height, size_t batch) {
            if (layer != "conv" && layer != "linear" && layer != "bn")
              throw fp::FormatError("LayerRule.matches: layer must be 'conv', 'linear' or 'bn' (got '" + layer + "')");
            const auto kind = layer == "conv" ? profiles::LayerShape::Kind::conv
                              : layer == "bn" ? profiles::LayerShape::Kind::batch_norm
                                              : profiles::LayerShape::Kind::linear;
            return r.match.matches({kind, in, out, kernel, stride, height, batch});
          },
          py::arg("layer"), py::arg("in_"), py::arg("out"), py::arg("kernel") = 0, py::arg("stride") = 0,
          py::arg("height") = 0, py::arg("batch") = 0,
          "Whether it applies to a layer: 'conv' (in/out channels, square kernel, stride, input height; batch: its "
          "images), "
          "'linear' (in/out features; batch: the rows it multiplies) or 'bn' (in: channels; height; batch).")
      .def("__str__", &profiles::describe_rule)
      .def("__repr__", [](const profiles::LayerRule& r) {
        return "LayerRule(" + std::string(py::repr(py::str(r.match.describe()))) + ")";
      });

  py::class_<profiles::HardwareProfile>(m, "Profile",
                                        "A hardware profile: per operation kind (fwd, dgrad, wgrad, bias_grad, "
                                        "bn_stats, softmax, loss) a schedule and arithmetic, in default and "
                                        "deterministic mode.")
      .def_readonly("name", &profiles::HardwareProfile::name)
      .def_readonly("description", &profiles::HardwareProfile::description)
      .def_readonly("path", &profiles::HardwareProfile::path,
                    "The file it was read from ('... (built in)' if shipped).")
      .def_readonly("parallelism", &profiles::HardwareProfile::parallelism, "The chip's numbers (descriptive).")
      .def_property_readonly(
          "default", [](const profiles::HardwareProfile& p) { return op_choices(p.default_ops); },
          "What the framework picks by default: {op kind: OpChoice}.")
      .def_property_readonly(
          "deterministic", [](const profiles::HardwareProfile& p) { return op_choices(p.deterministic_ops); },
          "What its deterministic switch picks: {op kind: OpChoice}.")
      .def_property_readonly(
          "layer_rules",
          [](const profiles::HardwareProfile& p) {
            return py::dict(py::arg("default") = p.default_ops.layer_rules,
                            py::arg("deterministic") = p.deterministic_ops.layer_rules);
          },
          "Per-layer exceptions to the tables (docs/profiles.md, \"Layer rules\"): {mode: [LayerRule, ...]}, "
          "first match wins.")
      .def_property_readonly(
          "conv_dgrad",
          [](const profiles::HardwareProfile& p) {
            return py::dict(py::arg("default") = std::string(profiles::conv_dgrad_name(p.default_ops.conv_dgrad)),
                            py::arg("deterministic") =
                                std::string(profiles::conv_dgrad_name(p.deterministic_ops.conv_dgrad)));
          },
          "How each table adds a convolution's input gradient: {mode: 'col2im' or 'direct'} (docs/profiles.md).")
      .def("__repr__", [](const profiles::HardwareProfile& p) {
        return "Profile(" + std::string(py::repr(py::str(p.name))) + ")";
      });

  m.def(
      "profile_names",
      [](const std::vector<std::string>& profiles_dir) { return profiles::hw_profile_names(profiles_dir); },
      py::arg("profiles_dir") = std::vector<std::string>{},
      "Every profile name the search path knows, sorted (profiles::hw_profile_names).");
  m.def(
      "find_profile",
      [](const std::string& name, const std::vector<std::string>& profiles_dir) {
        return profiles::find_hw_profile(name, profiles_dir);
      },
      py::arg("name"), py::arg("profiles_dir") = std::vector<std::string>{},
      "A profile by name or .toml path (profiles::find_hw_profile).");
}

}  // namespace fplab::python
