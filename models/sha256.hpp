// SHA-256 (FIPS 180-4), for fingerprints of weights and predictions and checksums of
// checkpoints: the same bytes give the same hex string on every machine. Not constant-time;
// nothing here is secret.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace fplab::models {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256() { reset(); }
  void reset();
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view text) { return update(text.data(), text.size()); }
  // The digest of everything added so far; the object is unchanged and can take more data.
  Sha256Digest digest() const;
  std::string hex_digest() const;

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes so far
};

std::string sha256_hex(const void* data, size_t size);
inline std::string sha256_hex(std::string_view text) { return sha256_hex(text.data(), text.size()); }
Sha256Digest sha256(const void* data, size_t size);

// Lower-case hex, two digits per byte.
std::string to_hex(std::span<const uint8_t> bytes);

}  // namespace fplab::models
