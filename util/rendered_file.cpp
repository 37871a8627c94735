#include "util/rendered_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/external_program.hpp"

namespace fplab::util {

const char* const kRenderFolderPrefix = ".fplab-render-";

namespace {

std::string ends_of(const std::string& bytes, size_t n) {
  return bytes.size() <= n ? bytes : bytes.substr(bytes.size() - n);
}

// Removes the private folder whatever way render_to leaves.
struct PrivateFolder {
  std::string path;
  ~PrivateFolder() {
    std::error_code ignored;
    if (!path.empty()) std::filesystem::remove_all(path, ignored);
  }
};

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// The first line of a program's complaint, for a one-line error.
std::string first_line(const std::string& text) {
  const size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) return "";
  const size_t end = text.find('\n', start);
  return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

bool looks_complete(const std::string& name, const std::string& bytes) {
  const size_t dot = name.rfind('.');
  const std::string extension = dot == std::string::npos ? "" : name.substr(dot);
  if (extension == ".png") {
    static const std::string signature = "\x89PNG\r\n\x1a\n";
    static const std::string iend("\0\0\0\0IEND\xae\x42\x60\x82", 12);
    return bytes.size() >= 20 && bytes.compare(0, 8, signature) == 0 && ends_of(bytes, 12) == iend;
  }
  if (extension == ".svg")
    return bytes.find("<svg") != std::string::npos && ends_of(bytes, 64).find("</svg>") != std::string::npos;
  if (extension == ".pdf")
    return bytes.rfind("%PDF", 0) == 0 && ends_of(bytes, 1024).find("%%EOF") != std::string::npos;
  return !bytes.empty();
}

void render_to(const std::string& path, const RenderJob& job) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (target.filename().empty()) throw RenderError(path + ": names a folder, not a file");
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string pattern = (folder / (std::string(kRenderFolderPrefix) + "XXXXXX")).string();
  PrivateFolder work;
  if (::mkdtemp(pattern.data()) == nullptr) throw RenderError(path + ": cannot write: " + std::strerror(errno));
  work.path = pattern;
  for (const auto& [name, contents] : job.inputs) {
    std::ofstream out(work.path + "/" + name, std::ios::binary);
    out << contents;
    out.close();
    if (!out) throw RenderError(path + ": cannot write: " + std::strerror(errno));
  }
  ProgramResult result;
  try {
    result = run_program(job.program, job.arguments, work.path);
  } catch (const ProgramNotFound&) {
    throw RenderError(path + ": needs the program '" + job.program + "'" +
                      (job.install_hint.empty() ? "" : " (" + job.install_hint + ")"));
  } catch (const std::exception& e) {
    throw RenderError(path + ": " + e.what());
  }
  if (result.exit_status != 0) {
    const std::string why = first_line(result.output);
    throw RenderError(path + ": " + job.program + " failed" + (why.empty() ? "" : ": " + why));
  }
  const std::string made = work.path + "/" + job.output;
  if (!looks_complete(job.output, read_whole(made)))
    throw RenderError(path + ": " + job.program + " wrote an incomplete file (disk full?)");
  const int fd = ::open(made.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  if (std::rename(made.c_str(), path.c_str()) != 0) throw RenderError(path + ": cannot write: " + std::strerror(errno));
}

size_t remove_interrupted_renders(const std::string& folder) {
  namespace fs = std::filesystem;
  std::error_code error;
  size_t removed = 0;
  for (const auto& entry : fs::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    const bool render = name.rfind(kRenderFolderPrefix, 0) == 0 && entry.is_directory(error);
    const bool partial =
        name.size() > 1 && name[0] == '.' && name.find(".tmp.") != std::string::npos && entry.is_regular_file(error);
    if (!render && !partial) continue;
    std::error_code ignored;
    if (fs::remove_all(entry.path(), ignored) > 0) ++removed;
  }
  return removed;
}

}  // namespace fplab::util
