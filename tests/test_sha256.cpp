// fplab's wrapper of libcrypto's SHA-256: the FIPS 180-2 example vectors (the only hard-coded
// digests), incremental hashing against one-shot hashing for every split, copies.
#include <catch2/catch.hpp>

#include <random>

#include "util/sha256.hpp"

using namespace fplab::util;

TEST_CASE("sha256: FIPS 180-2 example vectors") {
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  CHECK(sha256_hex(million) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // The same million in uneven pieces.
  Sha256 h;
  size_t done = 0;
  for (size_t piece = 1; done < million.size(); piece = piece * 3 % 997 + 1) {
    const size_t take = std::min(piece, million.size() - done);
    h.update(million.data() + done, take);
    done += take;
  }
  CHECK(h.hex_digest() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256: incremental hashing equals one-shot hashing for every split point") {
  std::mt19937 g(1);
  std::string text(300, '\0');
  for (auto& c : text) c = static_cast<char>(g());
  for (size_t n : {0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 200, 300}) {
    const std::string whole = sha256_hex(text.data(), n);
    for (size_t split = 0; split <= n; ++split) {
      Sha256 h;
      h.update(text.data(), split);
      const std::string before = h.hex_digest();  // reading the digest must not disturb it
      h.update(text.data() + split, n - split);
      INFO("length " << n << " split " << split);
      REQUIRE(h.hex_digest() == whole);
      REQUIRE(before == sha256_hex(text.data(), split));
    }
  }
  Sha256 h;
  h.update("abc");
  h.reset();
  h.update("abc");
  CHECK(h.hex_digest() == sha256_hex("abc"));
  CHECK(to_hex(std::vector<uint8_t>{0x00, 0x0f, 0xa0, 0xff}) == "000fa0ff");
}

TEST_CASE("sha256: a copy hashes on independently of the original") {
  Sha256 a;
  a.update("ab");
  Sha256 b = a;
  b.update("c");
  CHECK(b.hex_digest() == sha256_hex("abc"));
  CHECK(a.hex_digest() == sha256_hex("ab"));
  a = b;
  CHECK(a.hex_digest() == sha256_hex("abc"));
  CHECK(sha256_hex(nullptr, 0) == sha256_hex(""));  // an empty buffer may come as a null pointer
}
