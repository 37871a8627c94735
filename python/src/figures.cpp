// fplab._core.render_gnuplot: a gnuplot figure written as fplab's reports write theirs
// (util/gnuplot_figure.hpp: no shell, the terminal from the extension, the file written whole or
// not at all), for the Python scripts that draw from results (experiments/*.py).
#include "python/src/bindings.hpp"
#include "util/gnuplot_figure.hpp"

namespace fplab::python {

void bind_figures(py::module_& m) {
  m.def(
      "render_gnuplot",
      [](const std::string& path, const std::string& script, const std::string& data, int width, int height) {
        py::gil_scoped_release unlocked;
        util::render_gnuplot(path, script, data, width, height);
      },
      py::arg("path"), py::arg("script"), py::arg("data"), py::arg("width") = 900, py::arg("height") = 480,
      "Renders `script` (everything after `set terminal` and `set output`; it reads its data as 'data.dat') "
      "to `path`, whose extension (.png, .svg, .pdf) picks the terminal; width and height in pixels.");
  m.def("gnuplot_quoted", &util::gnuplot_quoted, py::arg("text"),
        "`text` as a gnuplot single-quoted string literal: safe for titles that hold user text.");
}

}  // namespace fplab::python
