// fplab._core.noise_op_id: the op id of an implementation-noise key as the C++ training forms it
// (models/context.hpp, Context::key): fp::mix_key({layer, op kind, part}). fplab.torch keys its
// operations with it, so that an operation at the same position, of the same kind and part, draws
// from the same stream as the C++ models' would.
#include <string>

#include "fp/counter_rng.hpp"
#include "profiles/op_table.hpp"
#include "python/src/bindings.hpp"

namespace fplab::python {
namespace {

profiles::OpKind op_kind(std::string_view name) {
  std::string known;
  for (const profiles::OpKind kind : profiles::all_op_kinds) {
    if (profiles::op_kind_name(kind) == name) return kind;
    known += (known.empty() ? "" : ", ") + std::string(profiles::op_kind_name(kind));
  }
  throw std::invalid_argument("noise_op_id: unknown operation kind '" + std::string(name) + "' (known: " + known + ")");
}

uint64_t noise_op_id(uint64_t layer, std::string_view kind, uint64_t part) {
  return fp::mix_key({layer, static_cast<uint64_t>(op_kind(kind)), part});
}

}  // namespace

void bind_noise_key(py::module_& m) {
  m.def("noise_op_id", &noise_op_id, py::arg("layer"), py::arg("op_kind"), py::arg("part") = 0,
        "The op id of the noise key of reduction `part` of kind `op_kind` (fwd, dgrad, ...) at position `layer`, "
        "as the C++ training forms it (models::Context::key).");
}

}  // namespace fplab::python
