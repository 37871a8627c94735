// Files that must never be seen half-written (checkpoints, weights, reports, tables): written
// under a temporary name beside the target, then renamed over it.
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

// The whole file; FileError ("<path>: cannot open: <reason>") if it cannot be read.
std::vector<uint8_t> read_file(const std::string& path);

}  // namespace fplab::util
