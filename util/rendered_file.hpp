// Files another program makes (a figure from gnuplot, an SVG from Graphviz), published only
// when complete. The program runs without a shell in a private folder made beside the target,
// on inputs with fixed names, so neither the user's path nor any text of theirs reaches a
// command line or a script; its output is checked before it is renamed into place, because
// gnuplot exits 0 even when a full disk cut its file short.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace fplab::util {

// One line, naming the target path and what went wrong.
struct RenderError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RenderJob {
  std::string program;                                      // e.g. "dot", "gnuplot"
  std::vector<std::string> arguments;                       // names inside the private folder
  std::vector<std::pair<std::string, std::string>> inputs;  // file name -> contents, written first
  std::string output;                                       // the file the program writes there
  std::string install_hint;                                 // said when the program is missing
};

// Runs the job and renames its output over `path`. The output must be a complete file of the
// kind its extension names (.png: PNG ending in IEND; .svg: closes </svg>; .pdf: ends in %%EOF;
// anything else: not empty). On any failure throws RenderError and leaves `path` as it was and
// no private folder behind.
void render_to(const std::string& path, const RenderJob& job);

// Whether `bytes` is a complete file of the kind `name`'s extension names (as above).
bool looks_complete(const std::string& name, const std::string& bytes);

// Private folders render_to leaves only when the process is killed mid-render: their names
// start with this prefix (".fplab-render-").
extern const char* const kRenderFolderPrefix;

// Removes such leftovers (and hidden ".NAME.tmp.*" files of interrupted atomic writes) directly
// inside `folder`; returns how many were removed. For --resume, which owns the folder.
size_t remove_interrupted_renders(const std::string& folder);

}  // namespace fplab::util
