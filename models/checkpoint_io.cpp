#include "models/checkpoint_io.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "util/sha256.hpp"

namespace fplab::models {
namespace {

constexpr char kMagic[8] = {'F', 'P', 'L', 'A', 'B', 'C', 'K', 'P'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderSize = 24;
constexpr size_t kChecksumSize = 32;
constexpr size_t kArrayHeaderSize = 16;

template <class T>
void put(std::vector<uint8_t>& out, T value) {
  const size_t at = out.size();
  out.resize(at + sizeof value);
  std::memcpy(out.data() + at, &value, sizeof value);
}

template <class T>
T get_at(std::span<const uint8_t> bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

const char* type_name(ArrayType type) {
  switch (type) {
    case ArrayType::float32:
      return "float32";
    case ArrayType::float64:
      return "float64";
    case ArrayType::uint64:
      return "uint64";
  }
  return "unknown";
}

size_t element_size(ArrayType type) { return type == ArrayType::float32 ? 4 : 8; }

// n elements from unaligned bytes. An empty array (an MLP's empty optimizer state, say) is left
// alone: its vector's data() is null, and memcpy to null is undefined even for 0 bytes.
template <class T>
void copy_elements(std::vector<T>& dest, const uint8_t* data, size_t n) {
  dest.resize(n);
  if (n > 0) std::memcpy(dest.data(), data, n * sizeof(T));
}

}  // namespace

void CheckpointWriter::add_raw(const std::string& name, ArrayType type, const void* data, size_t count, size_t size) {
  if (std::find(names_.begin(), names_.end(), name) != names_.end())
    throw std::invalid_argument("checkpoint array '" + name + "' added twice");
  names_.push_back(name);
  put(body_, static_cast<uint32_t>(name.size()));
  put(body_, static_cast<uint32_t>(type));
  put(body_, static_cast<uint64_t>(count));
  body_.insert(body_.end(), name.begin(), name.end());
  const auto* p = static_cast<const uint8_t*>(data);
  body_.insert(body_.end(), p, p + count * size);
}

CheckpointWriter& CheckpointWriter::add(const std::string& name, std::span<const float> values) {
  add_raw(name, ArrayType::float32, values.data(), values.size(), sizeof(float));
  return *this;
}
CheckpointWriter& CheckpointWriter::add(const std::string& name, std::span<const double> values) {
  add_raw(name, ArrayType::float64, values.data(), values.size(), sizeof(double));
  return *this;
}
CheckpointWriter& CheckpointWriter::add(const std::string& name, std::span<const uint64_t> values) {
  add_raw(name, ArrayType::uint64, values.data(), values.size(), sizeof(uint64_t));
  return *this;
}

std::vector<uint8_t> CheckpointWriter::bytes() const {
  std::vector<uint8_t> out(kMagic, kMagic + sizeof kMagic);
  put(out, kVersion);
  put(out, static_cast<uint32_t>(names_.size()));
  put(out, static_cast<uint64_t>(kHeaderSize + body_.size() + kChecksumSize));
  out.insert(out.end(), body_.begin(), body_.end());
  const util::Sha256Digest checksum = util::sha256(out.data(), out.size());
  out.insert(out.end(), checksum.begin(), checksum.end());
  return out;
}

CheckpointReader CheckpointReader::read(const std::string& path) { return parse(util::read_file(path), path); }

CheckpointReader CheckpointReader::parse(std::span<const uint8_t> bytes, const std::string& path) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw DataError(path, bytes.size() < sizeof kMagic
                              ? "truncated checkpoint: " + std::to_string(bytes.size()) + " bytes"
                              : "not an fplab checkpoint (bad magic)");
  if (bytes.size() < kHeaderSize + kChecksumSize)
    throw DataError(path, "truncated checkpoint: " + std::to_string(bytes.size()) +
                              " bytes, the header and checksum need " + std::to_string(kHeaderSize + kChecksumSize));
  const auto declared = get_at<uint64_t>(bytes, 16);
  const size_t body_end = bytes.size() - kChecksumSize;
  const util::Sha256Digest checksum = util::sha256(bytes.data(), body_end);
  if (!std::equal(checksum.begin(), checksum.end(), bytes.begin() + static_cast<std::ptrdiff_t>(body_end))) {
    if (declared > bytes.size())
      throw DataError(path, "truncated checkpoint: " + std::to_string(bytes.size()) + " bytes, its header says " +
                                std::to_string(declared));
    if (declared < bytes.size())
      throw DataError(path, "corrupted checkpoint: " + std::to_string(bytes.size() - declared) +
                                " bytes after its end (header says " + std::to_string(declared) + " bytes)");
    throw DataError(path, "corrupted checkpoint: SHA-256 checksum mismatch");
  }
  const auto version = get_at<uint32_t>(bytes, 8);
  if (version != kVersion)
    throw DataError(path, "checkpoint version " + std::to_string(version) + " is not supported (this build reads " +
                              std::to_string(kVersion) + ")");
  // The checksum matched, so the rest was written by CheckpointWriter; still check every
  // bound rather than trust a length.
  const auto malformed = [&](const std::string& what) { return DataError(path, "malformed checkpoint: " + what); };
  if (declared != bytes.size()) throw malformed("size field " + std::to_string(declared));
  CheckpointReader reader;
  reader.path_ = path;
  const auto count = get_at<uint32_t>(bytes, 12);
  size_t at = kHeaderSize;
  for (uint32_t i = 0; i < count; ++i) {
    if (body_end - at < kArrayHeaderSize) throw malformed("array " + std::to_string(i) + " runs past the end");
    const auto name_length = get_at<uint32_t>(bytes, at);
    const auto type = static_cast<ArrayType>(get_at<uint32_t>(bytes, at + 4));
    const auto elements = get_at<uint64_t>(bytes, at + 8);
    at += kArrayHeaderSize;
    if (type != ArrayType::float32 && type != ArrayType::float64 && type != ArrayType::uint64)
      throw malformed("array " + std::to_string(i) + " has unknown type " +
                      std::to_string(static_cast<uint32_t>(type)));
    const size_t room = body_end - at;
    if (name_length > room || elements > (room - name_length) / element_size(type))
      throw malformed("array " + std::to_string(i) + " runs past the end");
    Entry entry{std::string(reinterpret_cast<const char*>(bytes.data() + at), name_length), type, {}, {}, {}};
    at += name_length;
    const uint8_t* data = bytes.data() + at;
    const size_t n = static_cast<size_t>(elements);
    switch (type) {
      case ArrayType::float32:
        copy_elements(entry.f32, data, n);
        break;
      case ArrayType::float64:
        copy_elements(entry.f64, data, n);
        break;
      case ArrayType::uint64:
        copy_elements(entry.u64, data, n);
        break;
    }
    at += n * element_size(type);
    if (reader.find(entry.name) != nullptr) throw malformed("array '" + entry.name + "' appears twice");
    reader.entries_.push_back(std::move(entry));
  }
  if (at != body_end) throw malformed(std::to_string(body_end - at) + " bytes after the last array");
  return reader;
}

std::vector<std::string> CheckpointReader::names() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) out.push_back(e.name);
  return out;
}

const CheckpointReader::Entry* CheckpointReader::find(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

const CheckpointReader::Entry& CheckpointReader::get(const std::string& name, ArrayType type) const {
  const Entry* entry = find(name);
  if (entry == nullptr) throw DataError(path_, "checkpoint has no array '" + name + "'");
  if (entry->type != type)
    throw DataError(path_,
                    "checkpoint array '" + name + "' holds " + type_name(entry->type) + ", not " + type_name(type));
  return *entry;
}

std::span<const float> CheckpointReader::f32(const std::string& name) const {
  return get(name, ArrayType::float32).f32;
}
std::span<const double> CheckpointReader::f64(const std::string& name) const {
  return get(name, ArrayType::float64).f64;
}
std::span<const uint64_t> CheckpointReader::u64(const std::string& name) const {
  return get(name, ArrayType::uint64).u64;
}

uint64_t CheckpointReader::scalar(const std::string& name) const {
  const auto values = u64(name);
  if (values.size() != 1)
    throw DataError(
        path_, "checkpoint array '" + name + "' has " + std::to_string(values.size()) + " elements, a scalar has 1");
  return values[0];
}

}  // namespace fplab::models
