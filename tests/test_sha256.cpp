// SHA-256 against the FIPS 180-2 example vectors (the only hard-coded digests), incremental
// hashing against one-shot hashing for every split, and, where coreutils' sha256sum is
// installed, against it for every length across the padding boundaries.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "models/sha256.hpp"

using namespace fplab::models;

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

TEST_CASE("sha256: agrees with coreutils sha256sum for every length from 0 to 200 bytes") {
  if (std::system("command -v sha256sum >/dev/null 2>&1") != 0) {
    WARN("sha256sum not installed: comparison skipped");
    return;
  }
  const auto dir = std::filesystem::temp_directory_path() / ("fplab-sha-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::mt19937 g(2);
  std::vector<std::string> inputs;
  std::string command = "cd " + dir.string() + " && sha256sum";
  for (int n = 0; n <= 200; ++n) {
    std::string bytes(static_cast<size_t>(n), '\0');
    for (auto& c : bytes) c = static_cast<char>(g());
    std::ofstream(dir / std::to_string(n), std::ios::binary) << bytes;
    inputs.push_back(bytes);
    command += " " + std::to_string(n);
  }
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char line[256];
  int n = 0, wrong = 0;
  while (fgets(line, sizeof line, pipe) != nullptr) {
    const std::string expected(line, 64);
    if (sha256_hex(inputs.at(static_cast<size_t>(n)).data(), inputs[static_cast<size_t>(n)].size()) != expected) {
      ++wrong;
      WARN("length " << n << ": sha256sum says " << expected);
    }
    ++n;
  }
  pclose(pipe);
  std::filesystem::remove_all(dir);
  CHECK(n == 201);
  CHECK(wrong == 0);
}
