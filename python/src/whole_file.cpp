// fplab._core.write_file_atomically: a file written as fplab writes its results (util/whole_file.hpp:
// under a temporary name beside it, then renamed over it, so nobody sees it half-written), for the
// Python scripts that write tables and JSON (experiments/*.py).
#include "python/src/bindings.hpp"
#include "util/whole_file.hpp"

namespace fplab::python {

void bind_whole_file(py::module_& m) {
  m.def(
      "write_file_atomically",
      [](const std::string& path, const std::string& text) {
        py::gil_scoped_release unlocked;
        util::write_file_atomically(path, std::string_view(text));
      },
      py::arg("path"), py::arg("text"),
      "Writes `text` to `path` whole or not at all (a temporary file in its folder, renamed over it); "
      "fplab.Error, one line naming the path, where it cannot.");
}

}  // namespace fplab::python
