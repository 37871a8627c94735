#include "fp/counter_rng.hpp"

namespace fplab::fp {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{kMul0} * c[0];
    const uint64_t p1 = uint64_t{kMul1} * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

uint64_t CounterRng::at(uint64_t n) const {
  const auto out = philox4x32({static_cast<uint32_t>(n), static_cast<uint32_t>(n >> 32), static_cast<uint32_t>(stream_),
                               static_cast<uint32_t>(stream_ >> 32)},
                              {static_cast<uint32_t>(key_), static_cast<uint32_t>(key_ >> 32)});
  // Two of the four output words; the other two are a second number we do not need.
  return (uint64_t{out[0]} << 32) | out[1];
}

uint64_t CounterRng::below(uint64_t bound) {
  // Lemire's multiply-shift with rejection of the biased low range.
  const uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const unsigned __int128 product = static_cast<unsigned __int128>(next()) * bound;
    if (static_cast<uint64_t>(product) >= threshold) return static_cast<uint64_t>(product >> 64);
  }
}

uint64_t mix_key(std::initializer_list<uint64_t> words) {
  // SplitMix64 finaliser folded over the words: distinct tuples give unrelated keys.
  uint64_t h = 0x6A09E667F3BCC909ull;
  for (uint64_t w : words) {
    h ^= w + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 31;
  }
  return h;
}

}  // namespace fplab::fp
