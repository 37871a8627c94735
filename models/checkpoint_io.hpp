// A small binary container of named arrays for checkpoints, written whole or not at all
// (util/whole_file.hpp).
//
// Container layout (all integers little-endian):
//   "FPLABCKP"  u32 version (1)  u32 array count  u64 file size in bytes
//   per array:  u32 name length  u32 type (1 float32, 2 float64, 3 uint64)  u64 element count
//               name bytes  elements
//   32-byte SHA-256 of every byte before it
// A file that is truncated, has bytes after its end, or has any byte changed is refused with a
// DataError naming the path and the problem.
//
// Assumption: a little-endian host with IEEE 754 float and double (checked at compile time).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/data_error.hpp"
#include "util/whole_file.hpp"

namespace fplab::models {

static_assert(std::endian::native == std::endian::little, "checkpoints are written as the host's little-endian bytes");

enum class ArrayType : uint32_t { float32 = 1, float64 = 2, uint64 = 3 };

class CheckpointWriter {
 public:
  // Names are unique (std::invalid_argument otherwise); arrays are stored in the order added.
  CheckpointWriter& add(const std::string& name, std::span<const float> values);
  CheckpointWriter& add(const std::string& name, std::span<const double> values);
  CheckpointWriter& add(const std::string& name, std::span<const uint64_t> values);
  CheckpointWriter& add_scalar(const std::string& name, uint64_t value) {
    return add(name, std::span<const uint64_t>(&value, 1));
  }

  std::vector<uint8_t> bytes() const;
  void write(const std::string& path) const { util::write_file_atomically(path, bytes()); }

 private:
  void add_raw(const std::string& name, ArrayType type, const void* data, size_t count, size_t element_size);
  std::vector<uint8_t> body_;
  std::vector<std::string> names_;
};

class CheckpointReader {
 public:
  static CheckpointReader read(const std::string& path);
  // `path` only names the source in errors.
  static CheckpointReader parse(std::span<const uint8_t> bytes, const std::string& path);

  bool has(const std::string& name) const { return find(name) != nullptr; }
  std::vector<std::string> names() const;
  // The array of that name and type; DataError if it is missing or of another type.
  std::span<const float> f32(const std::string& name) const;
  std::span<const double> f64(const std::string& name) const;
  std::span<const uint64_t> u64(const std::string& name) const;
  uint64_t scalar(const std::string& name) const;  // a uint64 array of exactly one element

 private:
  struct Entry {
    std::string name;
    ArrayType type;
    std::vector<float> f32;
    std::vector<double> f64;
    std::vector<uint64_t> u64;
  };
  const Entry* find(const std::string& name) const;
  const Entry& get(const std::string& name, ArrayType type) const;
  std::string path_;
  std::vector<Entry> entries_;
};

}  // namespace fplab::models
