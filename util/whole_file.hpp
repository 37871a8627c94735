// Whole files: written so that nobody ever sees one half-written (checkpoints, weights, reports,
// tables: under a temporary name beside the target, then renamed over it), and read entirely.
//
// Assumption: a POSIX file system where rename(2) within a folder is atomic.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/file_error.hpp"

namespace fplab::util {

// Writes `bytes` to a temporary file in path's folder, fsyncs it, renames it over `path` and
// fsyncs the folder: readers see the old file or the new one, never a part. Throws FileError
// ("<path>: cannot write: <reason>") and leaves no temporary file behind.
void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes);
void write_file_atomically(const std::string& path, std::string_view text);

// The whole file; FileError ("<path>: cannot open: <reason>", or "cannot read: ...") if it
// cannot be read.
std::vector<uint8_t> read_file(const std::string& path);
// The same as text (a configuration, a profile, an experiment).
std::string read_text_file(const std::string& path);

}  // namespace fplab::util
