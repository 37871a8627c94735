// SHA-256 through OpenSSL's libcrypto, for fingerprints of weights and predictions and
// checksums of checkpoints: the same bytes give the same hex string on every machine.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace fplab::util {

using Sha256Digest = std::array<uint8_t, 32>;

// An incremental hash: update() any number of times, digest() at any point.
class Sha256 {
 public:
  Sha256();
  Sha256(const Sha256& other);
  Sha256& operator=(const Sha256& other);
  ~Sha256();
  void reset();
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view text) { return update(text.data(), text.size()); }
  // The digest of everything added so far; the object is unchanged and can take more data.
  Sha256Digest digest() const;
  std::string hex_digest() const;

 private:
  void* context_;  // EVP_MD_CTX, kept out of this header
};

std::string sha256_hex(const void* data, size_t size);
inline std::string sha256_hex(std::string_view text) { return sha256_hex(text.data(), text.size()); }
Sha256Digest sha256(const void* data, size_t size);

// Lower-case hex, two digits per byte.
std::string to_hex(std::span<const uint8_t> bytes);

}  // namespace fplab::util
