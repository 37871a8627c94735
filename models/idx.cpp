// Assumptions: POSIX open(2) (errno tells a missing file from an unreadable one); zlib >= 1.2.4
// (gzread reads non-gzip files transparently; a gzip stream cut short reads as Z_BUF_ERROR).
#include "models/idx.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

namespace fplab::models {
namespace {

std::string hex(uint32_t value, int digits) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%0*X", digits, value);
  return text;
}

std::string type_name(uint8_t type) {
  switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "unknown";
  }
}

std::string magic_description(uint32_t magic) {
  if (magic == kIdxImagesMagic) return "images: unsigned bytes, 3 dimensions";
  if (magic == kIdxLabelsMagic) return "labels: unsigned bytes, 1 dimension";
  return "unsigned bytes, " + std::to_string(magic & 0xFF) + " dimensions";
}

// The whole file, decompressed if it is gzip.
std::vector<uint8_t> read_all(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      throw DataError(path, "cannot open (is the dataset-fashion-mnist package installed? scripts/setup installs it)");
    throw DataError(path, std::string("cannot open: ") + std::strerror(errno));
  }
  gzFile file = gzdopen(fd, "rb");
  if (file == nullptr) {
    ::close(fd);
    throw DataError(path, "cannot open: out of memory in zlib");
  }
  std::vector<uint8_t> bytes;
  constexpr unsigned kChunk = 1u << 20;
  for (;;) {
    const size_t old = bytes.size();
    bytes.resize(old + kChunk);
    errno = 0;
    const int got = gzread(file, bytes.data() + old, kChunk);
    if (got < 0) {
      int code = 0;
      const std::string message = gzerror(file, &code);
      const int saved_errno = errno;
      gzclose(file);
      if (code == Z_ERRNO) throw DataError(path, std::string("cannot read: ") + std::strerror(saved_errno));
      throw DataError(path, "corrupt gzip data (zlib: " + message + ")");
    }
    bytes.resize(old + static_cast<size_t>(got));
    if (static_cast<unsigned>(got) < kChunk) break;
  }
  int code = 0;
  const std::string message = gzerror(file, &code);
  gzclose(file);
  if (code == Z_BUF_ERROR) throw DataError(path, "truncated gzip data (the compressed stream ends early)");
  if (code != Z_OK) throw DataError(path, "corrupt gzip data (zlib: " + message + ")");
  return bytes;
}

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

IdxArray parse_idx(std::vector<uint8_t> bytes, const std::string& path, uint32_t expected_magic,
                   const std::string& what) {
  if (bytes.size() < 4)
    throw DataError(path, "truncated: an IDX file starts with a 4-byte magic number, got " +
                              std::to_string(bytes.size()) + " bytes");
  const uint32_t magic = big_endian_u32(bytes.data());
  if (magic >> 16 != 0) throw DataError(path, "not an IDX file: magic " + hex(magic, 8) + " does not start with two zero bytes");
  const uint8_t type = static_cast<uint8_t>(magic >> 8);
  if (type != 0x08)
    throw DataError(path, "unsupported element type " + hex(type, 2) + " (" + type_name(type) +
                              "); only unsigned byte (0x08) is supported");
  const unsigned ndims = magic & 0xFF;
  if (ndims < 1 || ndims > 4)
    throw DataError(path, "bad dimension count " + std::to_string(ndims) + " (1 to 4 are supported)");
  if (expected_magic != 0 && magic != expected_magic)
    throw DataError(path, "wrong magic " + hex(magic, 8) + ", expected " + hex(expected_magic, 8) + " (" +
                              magic_description(expected_magic) + ")");
  const size_t header = 4 + 4 * size_t{ndims};
  if (bytes.size() < header)
    throw DataError(path, "truncated: the header needs " + std::to_string(header) + " bytes, got " +
                              std::to_string(bytes.size()));
  IdxArray array;
  uint64_t elements = 1;
  for (unsigned d = 0; d < ndims; ++d) {
    const uint32_t dim = big_endian_u32(bytes.data() + 4 + 4 * d);
    array.dims.push_back(dim);
    // Saturate: such a size can never match the data and is reported as truncation.
    elements = (dim != 0 && elements > std::numeric_limits<uint64_t>::max() / dim) ? std::numeric_limits<uint64_t>::max()
                                                                                    : elements * dim;
  }
  const uint64_t payload = bytes.size() - header;
  if (payload < elements)
    throw DataError(path, "truncated: expected " + std::to_string(elements) + " bytes of " + what + ", got " +
                              std::to_string(payload));
  if (payload > elements)
    throw DataError(path, "trailing garbage: " + std::to_string(payload - elements) + " bytes after the " +
                              std::to_string(elements) + " bytes of " + what);
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(header));
  array.data = std::move(bytes);
  return array;
}

IdxArray read_idx(const std::string& path) { return parse_idx(read_all(path), path, 0, "elements"); }

IdxArray read_idx(const std::string& path, uint32_t expected_magic, const std::string& what) {
  return parse_idx(read_all(path), path, expected_magic, what);
}

}  // namespace fplab::models
