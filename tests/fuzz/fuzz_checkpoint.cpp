// libFuzzer target for checkpoint files (models/checkpoint_io.hpp, CheckpointReader::parse).
// A random file almost never carries a valid SHA-256, so each input is tried twice: as the whole
// file, and sealed: its first byte as the array count, the rest as the body, framed by a correct
// header and checksum, which takes the fuzzer past the checksum into the array parser.
// Properties: every refusal is a DataError naming the file; a file that parses
// holds arrays that CheckpointWriter writes back to exactly the same bytes (so no field was
// misread, no array lost or invented); nothing else escapes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "models/checkpoint_io.hpp"
#include "util/sha256.hpp"

namespace {

using namespace fplab::models;

void check(bool property) {
  if (!property) std::abort();
}

template <class T>
void put(std::vector<uint8_t>& out, T value) {
  const size_t at = out.size();
  out.resize(at + sizeof value);
  std::memcpy(out.data() + at, &value, sizeof value);
}

void parse_one(const std::vector<uint8_t>& file) {
  const std::string path = "fuzz.ckpt";
  CheckpointReader reader;
  try {
    reader = CheckpointReader::parse(file, path);
  } catch (const DataError& e) {
    const std::string message = e.what();
    check(message.rfind(path + ": ", 0) == 0);  // names may hold any byte: fplab prints it through one_line
    return;
  }
  CheckpointWriter writer;
  for (const std::string& name : reader.names()) {
    // The reader tells an array's type only through its typed getters.
    try {
      writer.add(name, reader.f32(name));
      continue;
    } catch (const DataError&) {
    }
    try {
      writer.add(name, reader.f64(name));
      continue;
    } catch (const DataError&) {
    }
    writer.add(name, reader.u64(name));
  }
  check(writer.bytes() == file);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;
  parse_one(std::vector<uint8_t>(data, data + size));
  if (size == 0) return 0;
  std::vector<uint8_t> sealed = {'F', 'P', 'L', 'A', 'B', 'C', 'K', 'P'};
  put<uint32_t>(sealed, 1);
  put<uint32_t>(sealed, data[0]);
  put<uint64_t>(sealed, 8 + 4 + 4 + 8 + (size - 1) + 32);
  sealed.insert(sealed.end(), data + 1, data + size);
  const fplab::util::Sha256Digest checksum = fplab::util::sha256(sealed.data(), sealed.size());
  sealed.insert(sealed.end(), checksum.begin(), checksum.end());
  parse_one(sealed);
  return 0;
}
