// The one exception type for a problem with a file on disk (a dataset file, a checkpoint, any
// file fplab writes): missing, unreadable, truncated, malformed, corrupted, or impossible to
// write. Its message is one line that starts with the path and says what is wrong, so the
// command line can print it as it is and exit 2.
#pragma once

#include <stdexcept>
#include <string>

namespace fplab::util {

class FileError : public std::runtime_error {
 public:
  FileError(const std::string& path, const std::string& problem) : std::runtime_error(path + ": " + problem) {}
};

}  // namespace fplab::util
