#include "util/sha256.hpp"

#include <openssl/evp.h>

#include <new>
#include <stdexcept>

namespace fplab::util {
namespace {

EVP_MD_CTX* as_context(void* p) { return static_cast<EVP_MD_CTX*>(p); }

EVP_MD_CTX* new_context() {
  EVP_MD_CTX* context = EVP_MD_CTX_new();
  if (context == nullptr) throw std::bad_alloc();
  return context;
}

void check(int ok) {
  if (ok != 1) throw std::runtime_error("libcrypto's SHA-256 failed");
}

}  // namespace

Sha256::Sha256() : context_(new_context()) { reset(); }

Sha256::Sha256(const Sha256& other) : context_(new_context()) {
  check(EVP_MD_CTX_copy_ex(as_context(context_), as_context(other.context_)));
}

Sha256& Sha256::operator=(const Sha256& other) {
  if (this != &other) check(EVP_MD_CTX_copy_ex(as_context(context_), as_context(other.context_)));
  return *this;
}

Sha256::~Sha256() { EVP_MD_CTX_free(as_context(context_)); }

void Sha256::reset() { check(EVP_DigestInit_ex(as_context(context_), EVP_sha256(), nullptr)); }

Sha256& Sha256::update(const void* data, size_t size) {
  if (size > 0) check(EVP_DigestUpdate(as_context(context_), data, size));
  return *this;
}

Sha256Digest Sha256::digest() const {
  Sha256 copy(*this);
  Sha256Digest out;
  unsigned int length = 0;
  check(EVP_DigestFinal_ex(as_context(copy.context_), out.data(), &length));
  return out;
}

std::string Sha256::hex_digest() const {
  const auto d = digest();
  return to_hex(d);
}

Sha256Digest sha256(const void* data, size_t size) { return Sha256().update(data, size).digest(); }

std::string sha256_hex(const void* data, size_t size) { return to_hex(sha256(data, size)); }

std::string to_hex(std::span<const uint8_t> bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

}  // namespace fplab::util
