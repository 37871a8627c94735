// A gnuplot figure written through render_to: the terminal is chosen from the target's
// extension (.png, .svg, .pdf) and the data is the file 'data.dat' in the script's folder.
#pragma once

#include <string>

namespace fplab::util {

// `script` is everything after `set terminal` and `set output` (added here); it reads its data
// as 'data.dat'. Width and height are in pixels (PDF: at 100 pixels an inch).
void render_gnuplot(const std::string& path, const std::string& script, const std::string& data, int width = 900,
                    int height = 480);

// `text` as a gnuplot single-quoted string literal (quotes doubled, line breaks as spaces):
// safe for titles that hold user text, since single-quoted strings take no escapes.
std::string gnuplot_quoted(const std::string& text);

}  // namespace fplab::util
