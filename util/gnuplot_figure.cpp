#include "util/gnuplot_figure.hpp"

#include "util/rendered_file.hpp"

namespace fplab::util {

std::string gnuplot_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'')
      out += "''";
    else if (c == '\n' || c == '\r')
      out += ' ';
    else
      out += c;
  }
  return out + "'";
}

void render_gnuplot(const std::string& path, const std::string& script, const std::string& data, int width,
                    int height) {
  const size_t dot = path.rfind('.');
  const std::string extension = dot == std::string::npos ? "" : path.substr(dot);
  std::string terminal;
  const std::string size = std::to_string(width) + "," + std::to_string(height);
  if (extension == ".png")
    terminal = "pngcairo size " + size;
  else if (extension == ".svg")
    terminal = "svg size " + size;
  else if (extension == ".pdf")
    terminal = "pdfcairo size " + std::to_string(width / 100.0) + "in," + std::to_string(height / 100.0) + "in";
  else
    throw RenderError(path + ": figures are written as .png, .svg or .pdf (the extension picks the format)");
  const std::string output = "figure" + extension;
  const std::string full = "set terminal " + terminal + "\nset output '" + output + "'\n" + script + "\nset output\n";
  render_to(path, {"gnuplot",
                   {"figure.gp"},
                   {{"figure.gp", full}, {"data.dat", data}},
                   output,
                   "scripts/setup installs gnuplot-nox"});
}

}  // namespace fplab::util
