// Reader of the IDX format (LeCun's MNIST files, also used by Fashion-MNIST), gzip-compressed or
// plain: zlib's gzread reads both.
//
// Format: a 4-byte magic 0x00 0x00 TYPE NDIMS, NDIMS big-endian uint32 dimensions, then the
// elements in row-major order, and nothing after them. Only TYPE 0x08 (unsigned byte) is
// supported; it is what (Fashion-)MNIST uses.
//
// Every problem is a DataError with one line naming the file and the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "models/data_error.hpp"

namespace fplab::models {

inline constexpr uint32_t kIdxImagesMagic = 0x00000803;  // ubyte, 3 dims (count, rows, cols)
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // ubyte, 1 dim (count)

struct IdxArray {
  std::vector<uint32_t> dims;  // outermost first
  std::vector<uint8_t> data;   // row-major, size = product of dims
  uint32_t magic() const { return 0x0800u | static_cast<uint32_t>(dims.size()); }
};

// Any unsigned-byte IDX file with 1 to 4 dimensions.
IdxArray read_idx(const std::string& path);

// An IDX file that must have the given magic (kIdxImagesMagic or kIdxLabelsMagic; the magic
// fixes the number of dimensions). `what` names the elements in errors ("pixels", "labels").
IdxArray read_idx(const std::string& path, uint32_t expected_magic, const std::string& what);

// The same on a file's bytes, already decompressed; `path` names it in errors, expected_magic 0
// takes any (the fuzz harness's entry point).
IdxArray parse_idx(std::vector<uint8_t> bytes, const std::string& path, uint32_t expected_magic,
                   const std::string& what);

}  // namespace fplab::models
