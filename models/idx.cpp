// Assumptions: POSIX open(2) (errno tells a missing file from an unreadable one); zlib >= 1.2.4
// (gzread reads non-gzip files transparently; a gzip stream cut short reads as Z_BUF_ERROR).
#include "models/idx.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>

namespace fplab::models {
namespace {

std::string hex(uint32_t value, int digits) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%0*X", digits, value);
  return text;
}

std::string type_name(uint8_t type) {
  switch (type) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return "unknown";
  }
}

std::string magic_description(uint32_t magic) {
  if (magic == kIdxImagesMagic) return "images: unsigned bytes, 3 dimensions";
  if (magic == kIdxLabelsMagic) return "labels: unsigned bytes, 1 dimension";
  return "unsigned bytes, " + std::to_string(magic & 0xFF) + " dimensions";
}

// The largest array read (elements of one byte): far above any image data set fplab trains on,
// far below what a header can claim (a 6 MB gzip of zeros can expand to 6 GB).
constexpr uint64_t kMaxElements = uint64_t{1} << 32;

// An IDX file opened for reading, decompressed if it is gzip, read only as far as asked.
class IdxStream {
 public:
  explicit IdxStream(const std::string& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      if (errno == ENOENT)
        throw DataError(path,
                        "cannot open (is the dataset-fashion-mnist package installed? scripts/setup installs it)");
      throw DataError(path, std::string("cannot open: ") + std::strerror(errno));
    }
    // Only regular files: a FIFO or a device would block or never end.
    struct stat info;
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      ::close(fd);
      throw DataError(path, "not a regular file");
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    file_ = gzdopen(fd, "rb");
    if (file_ == nullptr) {
      ::close(fd);
      throw DataError(path, "cannot open: out of memory in zlib");
    }
  }
  ~IdxStream() { gzclose(file_); }
  IdxStream(const IdxStream&) = delete;
  IdxStream& operator=(const IdxStream&) = delete;

  // Up to `size` bytes into `out` (fewer only at the end of the data).
  size_t read(uint8_t* out, size_t size) {
    size_t done = 0;
    while (done < size) {
      const unsigned ask = static_cast<unsigned>(std::min<size_t>(size - done, 1u << 30));
      errno = 0;
      const int got = gzread(file_, out + done, ask);
      if (got < 0) fail();
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    if (done < size) check_clean_end();
    return done;
  }

 private:
  [[noreturn]] void fail() {
    int code = 0;
    const std::string message = gzerror(file_, &code);
    if (code == Z_ERRNO) throw DataError(path_, std::string("cannot read: ") + std::strerror(errno));
    if (code == Z_BUF_ERROR) throw DataError(path_, "truncated gzip data (the compressed stream ends early)");
    throw DataError(path_, "corrupt gzip data (zlib: " + message + ")");
  }
  void check_clean_end() {
    int code = 0;
    gzerror(file_, &code);
    if (code != Z_OK) fail();
  }

  std::string path_;
  gzFile file_ = nullptr;
};

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Bytes already in memory (the fuzz harness's input), read like a stream.
class MemorySource {
 public:
  explicit MemorySource(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  size_t read(uint8_t* out, size_t size) {
    const size_t n = std::min(size, bytes_.size() - at_);
    if (n > 0) std::memcpy(out, bytes_.data() + at_, n);
    at_ += n;
    return n;
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

// Reads the header, checks it, then exactly the elements it promises and a bounded count more
// (to report trailing data): memory and time are bounded by the header, never by the file.
template <class Source>
IdxArray read_checked(Source& in, const std::string& path, uint32_t expected_magic, const std::string& what) {
  uint8_t head[4 + 4 * 4];
  const size_t got = in.read(head, 4);
  if (got < 4)
    throw DataError(path,
                    "truncated: an IDX file starts with a 4-byte magic number, got " + std::to_string(got) + " bytes");
  const uint32_t magic = big_endian_u32(head);
  if (magic >> 16 != 0)
    throw DataError(path, "not an IDX file: magic " + hex(magic, 8) + " does not start with two zero bytes");
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
  if (const size_t dims_got = in.read(head + 4, header - 4); dims_got < header - 4)
    throw DataError(
        path, "truncated: the header needs " + std::to_string(header) + " bytes, got " + std::to_string(4 + dims_got));
  IdxArray array;
  uint64_t elements = 1;
  for (unsigned d = 0; d < ndims; ++d) {
    const uint32_t dim = big_endian_u32(head + 4 + 4 * d);
    array.dims.push_back(dim);
    elements = (dim != 0 && elements > kMaxElements / dim) ? kMaxElements + 1 : elements * dim;
  }
  if (elements > kMaxElements)
    throw DataError(path, "the header promises more than " + std::to_string(kMaxElements) + " bytes of " + what +
                              " (dimensions too large for an image data set)");
  // Grown as the data arrives, so that a header promising gigabytes over a short file costs
  // what the file holds, not what the header says.
  size_t payload = 0;
  while (payload < elements) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(elements - payload, 1u << 20));
    array.data.resize(payload + chunk);
    const size_t got = in.read(array.data.data() + payload, chunk);
    payload += got;
    if (got < chunk) break;
  }
  array.data.resize(payload);
  if (payload < elements)
    throw DataError(path, "truncated: expected " + std::to_string(elements) + " bytes of " + what + ", got " +
                              std::to_string(payload));
  // Trailing bytes are counted up to a bound, not read to the end.
  constexpr size_t kTrailingCounted = 1 << 16;
  std::vector<uint8_t> extra(kTrailingCounted + 1);
  if (const size_t trailing = in.read(extra.data(), extra.size()); trailing > 0)
    throw DataError(path, "trailing garbage: " +
                              (trailing > kTrailingCounted ? "more than " + std::to_string(kTrailingCounted)
                                                           : std::to_string(trailing)) +
                              " bytes after the " + std::to_string(elements) + " bytes of " + what);
  return array;
}

}  // namespace

IdxArray read_idx(const std::string& path) { return read_idx(path, 0, "elements"); }

IdxArray read_idx(const std::string& path, uint32_t expected_magic, const std::string& what) {
  IdxStream in(path);
  return read_checked(in, path, expected_magic, what);
}

IdxArray parse_idx(std::vector<uint8_t> bytes, const std::string& path, uint32_t expected_magic,
                   const std::string& what) {
  MemorySource in(bytes);
  return read_checked(in, path, expected_magic, what);
}

}  // namespace fplab::models
