// Errors: every C++ exception that reaches Python (a bad format, mode or schedule, an unknown or
// malformed profile, a file problem, an array of the wrong shape) becomes fplab.Error, a
// ValueError, whose message is the one line the fplab command prints after "fplab: error: ".
#include <exception>
#include <new>
#include <string>

#include "python/src/bindings.hpp"
#include "util/one_line.hpp"

namespace fplab::python {
namespace {

// Owned by the module for the life of the interpreter (never released: Python may still raise
// it while shutting down).
PyObject* error_type = nullptr;

void translate(std::exception_ptr pending) {
  try {
    std::rethrow_exception(pending);
  } catch (const py::error_already_set&) {
    throw;  // a Python error passing through: pybind11 restores it
  } catch (const py::builtin_exception&) {
    throw;  // pybind11's own (TypeError for a bad argument, ...)
  } catch (const std::bad_alloc&) {
    throw;  // MemoryError
  } catch (const std::exception& e) {
    PyErr_SetString(error_type, util::one_line(e.what()).c_str());
  }
}

}  // namespace

void bind_errors(py::module_& m) {
  error_type = PyErr_NewExceptionWithDoc(
      "fplab.Error",
      "A bad format, rounding mode, schedule, profile, file or array: the one-line message the fplab command "
      "prints.",
      PyExc_ValueError, nullptr);
  if (!error_type) throw py::error_already_set();
  m.add_object("Error", py::handle(error_type));
  py::register_local_exception_translator(translate);
}

}  // namespace fplab::python
