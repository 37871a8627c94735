// Errors: every C++ exception that reaches Python (a bad format, mode or schedule, an unknown or
// malformed profile, a file problem, an array of the wrong shape) becomes fplab.Error, a
// ValueError, whose message is the one line the fplab command prints after "fplab: error: ".
#include <exception>
#include <new>
#include <string>

#include "python/src/bindings.hpp"

namespace fplab::python {
namespace {

// Owned by the module for the life of the interpreter (never released: Python may still raise
// it while shutting down).
PyObject* error_type = nullptr;

// The command line's rule (apps/cli_support.hpp, one_line): control characters that user text
// brought into a message are written as escapes, so that it stays on one line.
std::string escaped_controls(const char* message) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char* p = message; *p; ++p) {
    const auto byte = static_cast<unsigned char>(*p);
    if (byte >= 0x20 && byte != 0x7f)
      out += *p;
    else if (byte == '\n' || byte == '\t')
      out += byte == '\n' ? "\\n" : "\\t";
    else
      out += {'\\', 'x', kHex[byte >> 4], kHex[byte & 15]};
  }
  return out;
}

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
    PyErr_SetString(error_type, escaped_controls(e.what()).c_str());
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
