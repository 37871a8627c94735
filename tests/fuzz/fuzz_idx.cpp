// libFuzzer target for IDX data files (models/idx.hpp), as read after decompression. Properties:
// a file either parses to dims whose product is exactly the number of elements read, with a
// magic of 1 to 4 unsigned-byte dimensions, or is refused with a DataError of one line naming
// the file; nothing else escapes. Each input is read both as "any IDX" and as images.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "models/idx.hpp"

namespace {

void check(bool property) {
  if (!property) std::abort();
}

void parse_one(const uint8_t* data, size_t size, uint32_t expected_magic) {
  const std::string path = "fuzz.idx";
  try {
    const auto array =
        fplab::models::parse_idx(std::vector<uint8_t>(data, data + size), path, expected_magic, "pixels");
    check(!array.dims.empty() && array.dims.size() <= 4);
    check(expected_magic == 0 || array.magic() == expected_magic);
    uint64_t elements = 1;
    for (uint32_t d : array.dims) elements *= d;  // cannot overflow: the data holds them all
    check(elements == array.data.size());
    check(size == 4 + 4 * array.dims.size() + array.data.size());
  } catch (const fplab::models::DataError& e) {
    const std::string message = e.what();
    check(message.rfind(path + ": ", 0) == 0 && message.find('\n') == std::string::npos);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;
  parse_one(data, size, 0);
  parse_one(data, size, fplab::models::kIdxImagesMagic);
  return 0;
}
